import { JobError } from "./errors.js";
import { hasLoneSurrogate } from "./validate.js";

/** Deeper than this, JSON is refused: deeper still would overflow the stack while it is checked or written. */
export const MAX_JSON_DEPTH = 500;

/**
 * What to do with U+0000 and lone surrogates, which PostgreSQL cannot store: `refuse` them
 * (input the caller can fix: payloads, progress), or `replace` them with U+FFFD (what a
 * handler produced, which must be stored whatever it holds: results).
 */
export type UnstorableText = "refuse" | "replace";

/**
 * Serializes a payload (or result) to JSON text, refusing what JSON cannot carry faithfully:
 * functions, symbols, BigInt, cycles, non-finite numbers, nesting deeper than MAX_JSON_DEPTH,
 * values whose getters or toJSON throw, and (unless `replace`d) NUL characters and lone
 * surrogates — PostgreSQL text and jsonb cannot store U+0000, so every backend treats it alike.
 * Every refusal is a JobError naming the path of what is wrong.
 */
export function toJsonText(value: unknown, field: string | (() => string), text: UnstorableText = "refuse"): string | null {
  if (value === undefined || value === null) return null;
  let root: string | undefined;
  const name = () => (root ??= typeof field === "string" ? field : field());
  try {
    // The full check names the path of what is wrong, building a path string per key; run it
    // only when the quick one (no strings built) found something, or could not tell.
    if (!isPlain(value, text)) check(value, name(), { root: name(), text, seen: new Set() }, 1);
    const json = JSON.stringify(value);
    return text === "replace" ? replaceUnstorable(json) : json;
  } catch (error) {
    if (error instanceof JobError) throw error;
    // A proxy's trap, a stack exhausted by a caller already deep: still the caller's input.
    throw new JobError(`${name()}: cannot be written as JSON: ${error instanceof Error ? error.message : String(error)}`, name());
  }
}

/** A getter or proxy trap may throw on the quick walk: the full check then says where. */
function isPlain(value: unknown, text: UnstorableText): boolean {
  try {
    return plain(value, 0, text);
  } catch {
    return false;
  }
}

/** `\u0000` and lone-surrogate escapes (JSON.stringify writes lone surrogates escaped) not themselves escaped. */
const UNSTORABLE_ESCAPE = /(\\+)u(?:0000|d[89a-f][0-9a-f]{2})/g;

/** U+FFFD for each U+0000 and lone surrogate in JSON text from JSON.stringify. */
function replaceUnstorable(json: string): string {
  if (!json.includes("\\u")) return json;
  // An odd run of backslashes ends in an escape; an even one is escaped backslashes and text.
  return json.replace(UNSTORABLE_ESCAPE, (match, slashes: string) => (slashes.length % 2 === 1 ? `${slashes}ufffd` : match));
}

/** True when `value` is certainly plain, storable JSON; false when unsure (the full check decides). */
function plain(value: unknown, depth: number, text: UnstorableText): boolean {
  switch (typeof value) {
    case "string":
      return text === "replace" || (!value.includes("\u0000") && !hasLoneSurrogate(value));
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
        for (const item of value) if (!plain(item, depth + 1, text)) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if ((proto !== Object.prototype && proto !== null) || typeof (value as { toJSON?: unknown }).toJSON === "function") return false;
      for (const key in value) {
        if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
        if (!plain(key, depth, text) || !plain((value as Record<string, unknown>)[key], depth + 1, text)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

interface CheckState {
  /** The field named in a depth error: the whole path would be hundreds of segments long. */
  root: string;
  text: UnstorableText;
  seen: Set<object>;
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function check(value: unknown, path: string, state: CheckState, depth: number): void {
  switch (typeof value) {
    case "string":
      if (state.text === "replace") return;
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
      if (state.seen.has(value)) throw new JobError(`${path}: circular reference; a payload must be a tree of plain data`, path);
      const toJSON = read(value, "toJSON", path);
      if (typeof toJSON === "function") {
        // Date and friends: check what JSON.stringify will actually write.
        let written: unknown;
        try {
          written = (toJSON as () => unknown).call(value);
        } catch (error) {
          throw new JobError(`${path}: toJSON() threw: ${reason(error)}`, path);
        }
        check(written, path, state, depth);
        return;
      }
      if (depth > MAX_JSON_DEPTH) {
        throw new JobError(`${state.root}: nested more than ${MAX_JSON_DEPTH} levels deep; flatten it, or store it elsewhere and pass a reference`, state.root);
      }
      state.seen.add(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) check(read(value, i, `${path}[${i}]`), `${path}[${i}]`, state, depth + 1);
      } else {
        const proto = Object.getPrototypeOf(value) as unknown;
        if (proto !== Object.prototype && proto !== null) {
          const name = (value as { constructor?: { name?: string } }).constructor?.name ?? "object";
          throw new JobError(`${path}: a ${name} instance is not plain JSON data; pass a plain object`, path);
        }
        for (const key of Object.keys(value)) {
          if (state.text === "refuse" && (key.includes("\u0000") || hasLoneSurrogate(key))) {
            throw new JobError(`${path}: keys cannot contain NUL characters or lone surrogates`, path);
          }
          const at = /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
          check(read(value, key, at), at, state, depth + 1);
        }
      }
      state.seen.delete(value);
      return;
    }
  }
}

/** `value[key]`, with a throwing getter turned into a JobError naming where it is. */
function read(value: object, key: string | number, path: string): unknown {
  try {
    return (value as Record<string | number, unknown>)[key];
  } catch (error) {
    throw new JobError(`${path}: reading it threw: ${reason(error)}`, path);
  }
}
