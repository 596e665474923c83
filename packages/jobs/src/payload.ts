import { JobError } from "./errors.js";
import { hasLoneSurrogate } from "./validate.js";
import type { DialectName } from "./db/executor.js";

/**
 * Serializes a payload (or result) to JSON text, refusing what JSON cannot carry faithfully:
 * functions, symbols, BigInt, cycles, non-finite numbers, and NUL characters (PostgreSQL
 * text and jsonb cannot store U+0000, so every backend refuses it alike).
 */
export function toJsonText(value: unknown, field: string | (() => string)): string | null {
  if (value === undefined || value === null) return null;
  // The full check names the path of what is wrong, building a path string per key; run it
  // only when the quick one (no strings built) found something, or could not tell.
  if (!plain(value, 0)) check(value, typeof field === "string" ? field : field(), new Set());
  return JSON.stringify(value);
}

/** True when `value` is certainly plain, storable JSON; false when unsure (the full check decides). */
function plain(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case "string":
      return !value.includes("\u0000") && !hasLoneSurrogate(value);
    case "number":
      return Number.isFinite(value);
    case "boolean":
    case "undefined":
      return true;
    case "object": {
      if (value === null) return true;
      // Deep enough to be a cycle: let the full check (which tracks them) decide.
      if (depth > 64) return false;
      if (Array.isArray(value)) {
        for (const item of value) if (!plain(item, depth + 1)) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if ((proto !== Object.prototype && proto !== null) || typeof (value as { toJSON?: unknown }).toJSON === "function") return false;
      for (const key in value) {
        if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
        if (key.includes("\u0000") || hasLoneSurrogate(key) || !plain((value as Record<string, unknown>)[key], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

function check(value: unknown, path: string, seen: Set<object>): void {
  switch (typeof value) {
    case "string":
      if (value.includes("\u0000")) throw new JobError(`${path}: strings cannot contain NUL (\\u0000) characters; remove or encode them`, path);
      if (hasLoneSurrogate(value)) throw new JobError(`${path}: contains a lone surrogate (broken UTF-16); pass valid Unicode text`, path);
      return;
    case "number":
      if (!Number.isFinite(value)) throw new JobError(`${path}: ${value} is not a JSON number; use null or a string`, path);
      return;
    case "boolean":
      return;
    case "bigint":
      throw new JobError(`${path}: BigInt is not JSON; convert it to a string or a number`, path);
    case "function":
      throw new JobError(`${path}: a function is not JSON; pass data, not code`, path);
    case "symbol":
      throw new JobError(`${path}: a symbol is not JSON`, path);
    case "undefined":
      return; // dropped by JSON.stringify inside objects, null inside arrays: standard JSON
    case "object": {
      if (value === null) return;
      if (seen.has(value)) throw new JobError(`${path}: circular reference; a payload must be a tree of plain data`, path);
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === "function") {
        // Date and friends: check what JSON.stringify will actually write.
        check((toJSON as () => unknown).call(value), path, seen);
        return;
      }
      seen.add(value);
      if (Array.isArray(value)) {
        value.forEach((item, i) => check(item, `${path}[${i}]`, seen));
      } else {
        const proto = Object.getPrototypeOf(value) as unknown;
        if (proto !== Object.prototype && proto !== null) {
          const name = (value as { constructor?: { name?: string } }).constructor?.name ?? "object";
          throw new JobError(`${path}: a ${name} instance is not plain JSON data; pass a plain object`, path);
        }
        for (const [key, item] of Object.entries(value)) {
          if (key.includes("\u0000") || hasLoneSurrogate(key)) throw new JobError(`${path}: keys cannot contain NUL characters or lone surrogates`, path);
          check(item, /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`, seen);
        }
      }
      seen.delete(value);
      return;
    }
  }
}

/**
 * A JSON column as the driver returns it: pg parses jsonb itself (so a JSON string arrives
 * as a JS string and must not be parsed again); SQLite and MariaDB hand back the text.
 */
export function parseJson(value: unknown, dialect: DialectName): unknown {
  if (value === null || value === undefined) return null;
  if (dialect === "postgres") return value;
  if (typeof value === "string") return JSON.parse(value) as unknown;
  if (Buffer.isBuffer(value)) return JSON.parse(value.toString("utf8")) as unknown;
  return value;
}
