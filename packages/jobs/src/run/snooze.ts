import { types } from "node:util";
import { JobError } from "../base/errors.js";

/**
 * The longest snooze applied, in seconds (7 days): a longer delay is shortened to this. Past
 * a week a job is better planned than snoozed, and an absurd `Retry-After` (or a delay in
 * milliseconds given as seconds) must not push a job out of every backend's date range.
 */
export const MAX_SNOOZE_SECONDS = 7 * 24 * 3600;

/**
 * What `snooze(seconds)` builds: an `Error` whose own `snoozeSeconds` tells the queue to put
 * the job back for that long, attempts unchanged.
 */
export class JobSnooze extends Error {
  override readonly name = "JobSnooze";
  readonly snoozeSeconds: number;

  constructor(seconds: number, reason?: string) {
    super(reason ?? `snoozed for ${seconds}s`);
    this.snoozeSeconds = seconds;
  }
}

function validSeconds(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0;
}

function describe(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  return value === null ? "null" : typeof value;
}

/**
 * "Not now, in `seconds`": throw it or return it from a handler and the job goes back to
 * pending, due in `seconds` (database clock), its attempts unchanged and `snoozes` + 1.
 * `reason` is the error's message, for logs and events. Throws `JobError` on a delay that
 * is not a finite number ≥ 0.
 */
export function snooze(seconds: number, reason?: string): JobSnooze {
  if (!validSeconds(seconds)) throw new JobError(`snooze: seconds must be a finite number >= 0, got ${describe(seconds)}`, "seconds");
  return new JobSnooze(seconds, reason);
}

/** A handler's request to snooze, read from what it threw or returned. */
export type SnoozeRequest =
  /** Snooze for `seconds` (already shortened to MAX_SNOOZE_SECONDS); `asked` is the value given. */
  | { kind: "snooze"; seconds: number; asked: number }
  /** It carried a `snoozeSeconds` the queue cannot use: an ordinary error, and this says why. */
  | { kind: "invalid"; why: string };

/**
 * The structural protocol: an own `snoozeSeconds` property on what a handler threw. Own only,
 * as for `retryable`, so a class cannot make every error of a library snooze by accident.
 */
export function snoozeRequest(thrown: unknown): SnoozeRequest | null {
  if (typeof thrown !== "object" || thrown === null || !Object.prototype.hasOwnProperty.call(thrown, "snoozeSeconds")) return null;
  const asked = (thrown as { snoozeSeconds: unknown }).snoozeSeconds;
  if (!validSeconds(asked)) {
    return { kind: "invalid", why: `not snoozed: snoozeSeconds must be a finite number >= 0, got ${describe(asked)}` };
  }
  return { kind: "snooze", seconds: Math.min(asked, MAX_SNOOZE_SECONDS), asked };
}

/**
 * Whether a handler's resolved value asks to snooze: an `Error` object with an own
 * `snoozeSeconds` (what `snooze()` returns). A plain object with such a field is a result
 * like any other: only an error, which has no use as a stored result, is read as a verdict.
 */
export function isReturnedSnooze(value: unknown): boolean {
  return (value instanceof Error || types.isNativeError(value)) && Object.prototype.hasOwnProperty.call(value, "snoozeSeconds");
}
