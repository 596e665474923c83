import { JobError } from "./errors.js";

/** Names, keys and tenants fit an indexed VARCHAR(255) on every backend. */
export const MAX_NAME_LENGTH = 255;

/**
 * Fair-share groups, concurrency keys and schedule names: MariaDB keeps them in utf8mb4
 * VARCHAR(191) columns (191 × 4 bytes fits InnoDB's smallest index key, 767 bytes).
 * PostgreSQL's and SQLite's text columns take more; the smallest column decides for all three.
 */
export const MAX_FLOW_KEY_LENGTH = 191;

/**
 * Length as the columns count it: MariaDB's utf8mb4 VARCHAR(n) holds n code points, whatever
 * their bytes, and PostgreSQL counts the same way. JavaScript's `length` counts UTF-16 units,
 * two for an emoji, and would refuse keys the column stores.
 */
export function characterCount(value: string): number {
  let count = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/** The one error of a text over its column's length, in the unit the column counts. */
export function checkLength(value: string, max: number, field: string, where?: string): void {
  // Counting is only needed when the UTF-16 length could be over: most values are short.
  if (value.length <= max) return;
  const count = characterCount(value);
  if (count > max) {
    throw new JobError(
      `${where ? `${where}: ` : ""}${field} must be at most ${max} characters, got ${count} (characters as the database counts them: Unicode code points, an emoji is one)`,
      field,
    );
  }
}
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
export function checkOptionalKey(value: unknown, field: string, max = MAX_NAME_LENGTH): string | null {
  if (value === undefined || value === null || value === "") return null;
  if (typeof value !== "string") throw new JobError(`${field} must be a string, got ${describe(value)}`, field);
  checkText(value, field, max);
  return value;
}

/**
 * The prefix of the keys the scheduler gives its runs (schedule-rows.ts): the idempotency key
 * `schedule:<name>@<slot>` and, with overlap "skip", the dedup key `schedule:<name>`. A job of
 * the caller's holding one would stand in for a slot, or hold every run of the schedule back.
 */
export const RESERVED_KEY_PREFIX = "schedule:";

/** Marks the options of the scheduler's own enqueues, the only ones that may use the reserved prefix. */
export const SCHEDULER_ENQUEUE = Symbol("forge-jobs scheduler enqueue");

/** An idempotency or dedup key given to enqueue: a key, or null for none; never a reserved one unless `reservedAllowed`. */
export function checkJobKey(value: unknown, field: string, reservedAllowed: boolean): string | null {
  const key = checkOptionalKey(value, field);
  if (key !== null && !reservedAllowed && key.startsWith(RESERVED_KEY_PREFIX)) {
    throw new JobError(
      `${field} ${describe(key)} starts with ${JSON.stringify(RESERVED_KEY_PREFIX)}, which is reserved for the runs of schedules (a job holding it could keep a schedule from running); use another prefix`,
      field,
    );
  }
  return key;
}

/** A group or concurrency key: absent or empty means none. */
export function checkFlowKey(value: unknown, field: string): string {
  return checkOptionalKey(value, field, MAX_FLOW_KEY_LENGTH) ?? "";
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

function checkText(value: string, field: string, max = MAX_NAME_LENGTH): void {
  checkLength(value, max, field);
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
