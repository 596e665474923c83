import { JobError } from "../base/errors.js";
import { checkInteger, checkKnownOptions, checkName, describe } from "../base/validate.js";
import type { ResolvedJobDefaults } from "./database.js";
import { JOB_DEFAULTS_KEYS, QUEUE_JOB_DEFAULTS_KEYS } from "./option-keys.js";
import { DEFAULT_MAX_ATTEMPTS, MAX_MAX_ATTEMPTS } from "./options.js";
import type { JobAging } from "./database.js";
import { checkAging } from "./aging.js";

// `jobDefaults` of connect(), fromDriver() and fromQuery(): checked once when the database is
// made, read by every enqueue through it. It lives in code, on the database object, because
// max_attempts is stored with the job at enqueue: a default the workers held would not reach
// the row, and one in a table would be a read per enqueue.

/** No `jobDefaults`: the contract's defaults. */
export const CONTRACT_JOB_DEFAULTS: ResolvedJobDefaults = { maxAttempts: DEFAULT_MAX_ATTEMPTS, maxAttemptsByQueue: new Map() };

function plainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Map);
}

/** Checks `jobDefaults` before anything is opened; `where` is the function given it. */
export function checkJobDefaults(value: unknown, where: string): ResolvedJobDefaults {
  if (value === undefined) return CONTRACT_JOB_DEFAULTS;
  if (!plainObject(value)) {
    throw new JobError(`${where}: jobDefaults must be an object such as { maxAttempts: 3 }, got ${describe(value)}`, "jobDefaults");
  }
  checkKnownOptions(value, JOB_DEFAULTS_KEYS, `${where}: jobDefaults`);
  const maxAttempts = value.maxAttempts === undefined ? DEFAULT_MAX_ATTEMPTS : attempts(value.maxAttempts, "jobDefaults.maxAttempts");
  const byQueue = new Map<string, number>();
  const deadLetters = new Map<string, string>();
  const aging = new Map<string, JobAging>();
  const { queues } = value;
  if (queues !== undefined) {
    if (!plainObject(queues)) {
      throw new JobError(
        `${where}: jobDefaults.queues must be an object keyed by queue name, such as { mails: { maxAttempts: 5 } }, got ${describe(queues)}`,
        "jobDefaults.queues",
      );
    }
    for (const [queue, entry] of Object.entries(queues)) {
      const field = `jobDefaults.queues[${JSON.stringify(queue)}]`;
      checkName(queue, `${field}: a queue name`);
      if (!plainObject(entry)) throw new JobError(`${where}: ${field} must be an object such as { maxAttempts: 5 }, got ${describe(entry)}`, field);
      checkKnownOptions(entry, QUEUE_JOB_DEFAULTS_KEYS, `${where}: ${field}`);
      if (entry.maxAttempts !== undefined) byQueue.set(queue, attempts(entry.maxAttempts, `${field}.maxAttempts`));
      if (entry.deadLetter !== undefined) deadLetters.set(queue, checkDeadLetter(entry.deadLetter, queue, `${field}.deadLetter`));
      if (entry.priorityAging !== undefined) aging.set(queue, checkAging(entry.priorityAging, `${field}.priorityAging`));
    }
  }
  return { maxAttempts, maxAttemptsByQueue: byQueue, deadLetterByQueue: deadLetters, agingByQueue: aging };
}

/**
 * A dead-letter queue: a queue name other than the job's own (its dead letters would be
 * claimed by the very workers whose handler failed, and have none of their own).
 */
export function checkDeadLetter(value: unknown, queue: string, field: string): string {
  const name = checkName(value, field);
  if (name === queue) throw new JobError(`${field} must name another queue than the job's own (${JSON.stringify(queue)}), e.g. "${queue}-dead"`, field);
  return name;
}

/** The dead-letter queue of a job of `queue` enqueued without `deadLetter`, or null. */
export function defaultDeadLetter(defaults: ResolvedJobDefaults, queue: string): string | null {
  return defaults.deadLetterByQueue?.get(queue) ?? null;
}

function attempts(value: unknown, field: string): number {
  return checkInteger(value, field, 1, MAX_MAX_ATTEMPTS);
}

/** The maxAttempts of a job of `queue` enqueued without one. */
export function defaultMaxAttempts(defaults: ResolvedJobDefaults, queue: string): number {
  return defaults.maxAttemptsByQueue.get(queue) ?? defaults.maxAttempts;
}
