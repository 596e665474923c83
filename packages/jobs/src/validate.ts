import { JobError } from "./errors.js";

/** Names, keys and tenants fit an indexed VARCHAR(255) on every backend. */
export const MAX_NAME_LENGTH = 255;
const INT32_MAX = 2_147_483_647;

export function checkKnownOptions(options: object, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(options)) {
    if (!allowed.includes(key)) {
      throw new JobError(`${where}: unknown option ${JSON.stringify(key)}; allowed: ${allowed.join(", ")}`, key);
    }
  }
}

export function checkName(value: unknown, field: string): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new JobError(`${field} must be a non-empty string, got ${describe(value)}`, field);
  }
  checkText(value, field);
  return value;
}

/** A key or tenant: absent, or a string; the empty string means "no key". */
export function checkOptionalKey(value: unknown, field: string): string | null {
  if (value === undefined || value === null || value === "") return null;
  if (typeof value !== "string") throw new JobError(`${field} must be a string, got ${describe(value)}`, field);
  checkText(value, field);
  return value;
}

/** Fair-share groups and concurrency keys: MariaDB indexes them beside the queue name (at most 191 characters). */
export const MAX_FLOW_KEY_LENGTH = 191;

/** A group or concurrency key: absent or empty means none. */
export function checkFlowKey(value: unknown, field: string): string {
  const key = checkOptionalKey(value, field);
  if (key === null) return "";
  if (key.length > MAX_FLOW_KEY_LENGTH) throw new JobError(`${field} must be at most ${MAX_FLOW_KEY_LENGTH} characters, got ${key.length}`, field);
  return key;
}

/**
 * A tenant given explicitly must name one: an empty or non-string value (an org id that was
 * never set) would otherwise read as "no tenant" and widen a scoped read to every tenant's
 * jobs. Only a tenant left out (undefined) means "no tenant" / "every tenant".
 */
export function checkTenant(value: unknown, field: string, absentMeans: string): string | null {
  if (value === undefined) return null;
  if (typeof value !== "string" || value.length === 0) {
    throw new JobError(`${field} must be a non-empty string, got ${describe(value)}; leave ${field} out for ${absentMeans}`, field);
  }
  checkText(value, field);
  return value;
}

/** Job ids are positive integers on every backend; anything else is a caller's bug, not "not found". */
export function checkJobId(value: unknown, field = "id"): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
    throw new JobError(`${field} must be a job id (a positive integer), got ${describe(value)}`, field);
  }
  return value;
}

function checkText(value: string, field: string): void {
  if (value.length > MAX_NAME_LENGTH) {
    throw new JobError(`${field} must be at most ${MAX_NAME_LENGTH} characters, got ${value.length}`, field);
  }
  if (value.includes("\u0000")) throw new JobError(`${field} cannot contain NUL (\\u0000) characters`, field);
  if (hasLoneSurrogate(value)) {
    throw new JobError(`${field} contains a lone surrogate (broken UTF-16); pass valid Unicode text`, field);
  }
}

export function checkInteger(value: unknown, field: string, min: number, max = INT32_MAX): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new JobError(`${field} must be an integer from ${min} to ${max}, got ${describe(value)}`, field);
  }
  return value;
}

/** Durations are seconds everywhere in the API; fractions are allowed. */
export function checkSeconds(value: unknown, field: string, min = 0): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < min) {
    throw new JobError(`${field} must be a number of seconds ≥ ${min}, got ${describe(value)}`, field);
  }
  return value;
}

export function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return String(value);
  if (typeof value === "bigint") return `${value}n`;
  if (Array.isArray(value)) return "an array";
  if (typeof value === "function") return "a function";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** PostgreSQL refuses lone surrogates in text and jsonb; refuse them on every backend alike. */
export function hasLoneSurrogate(value: string): boolean {
  return LONE_SURROGATE.test(value);
}
