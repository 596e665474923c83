import { JobError } from "../base/errors.js";
import { checkInteger, checkKnownOptions, checkOptionalKey, describe } from "../base/validate.js";
import type { JobsDatabase } from "../core/database.js";
import type { JobOptions, ThrottleWindow } from "../core/options.js";
import { dbNow, forDialect, type PerDialect } from "../core/sql.js";
import type { Executor } from "../db/executor.js";

/**
 * A throttled job is an idempotency-keyed job whose key names its window:
 * `throttle:<key>:<seconds>:<slot>`. The key column already gives what a window needs — one
 * row per key, the race closed by its unique index, the loser handed the winner's id, and the
 * key held while the ended job is kept in history — and a window's key is never used again
 * once its slot has passed, so no other column or index is needed.
 */
const KEY_PREFIX = "throttle:";

/** 200 + the prefix, the seconds (8 digits) and the slot (10 digits at 1 s) fit the 255-character key column. */
export const MAX_THROTTLE_KEY_LENGTH = 200;
/** 366 days: a longer window is a one-off, which an idempotency key says better. */
export const MAX_THROTTLE_SECONDS = 366 * 86_400;

const THROTTLE_FIELDS = ["key", "seconds"];

/**
 * Whole seconds since the epoch by the database clock. PostgreSQL's clock_timestamp(), not
 * now(): inside a caller's long transaction now() is its start, which would put the job in a
 * window that may have passed. MariaDB's UTC_TIMESTAMP and SQLite's 'now' are the statement's.
 */
const EPOCH_SECONDS: PerDialect<string> = {
  postgres: "floor(extract(epoch FROM clock_timestamp()))::bigint",
  sqlite: `(${dbNow("sqlite")} / 1000)`,
  mysql: "TIMESTAMPDIFF(SECOND, TIMESTAMP'1970-01-01 00:00:00', UTC_TIMESTAMP(6))",
};

/** What keying a throttled job reads and writes of its row. */
export interface ThrottledJob {
  throttle: ThrottleWindow | null;
  idempotencyKey: string | null;
}

/**
 * The `throttle` option checked, or null without one. `field` names an option in errors
 * (`throttle`, `items[3].throttle`). Both keys must be absent: the window's key is the job's
 * idempotency key, and a dedup key could hand out a job of another window.
 */
export function checkThrottle(options: JobOptions, field: (name: string) => string): ThrottleWindow | null {
  const value: unknown = options.throttle;
  if (value === undefined) return null;
  const name = field("throttle");
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new JobError(`${name} must be an object { key, seconds }, got ${describe(value)}`, name);
  }
  checkKnownOptions(value, THROTTLE_FIELDS, name);
  const { key, seconds } = value as { key?: unknown; seconds?: unknown };
  if (typeof key !== "string" || key.length === 0) throw new JobError(`${name}.key must be a non-empty string, got ${describe(key)}`, `${name}.key`);
  // Length, NUL and broken UTF-16, as every key column is checked.
  checkOptionalKey(key, `${name}.key`, MAX_THROTTLE_KEY_LENGTH);
  const window = { key, seconds: checkInteger(seconds, `${name}.seconds`, 1, MAX_THROTTLE_SECONDS) };
  refuseWith(options, ["idempotencyKey", "dedupKey"], name, field, "a throttled job's idempotency key is its window's");
  return window;
}

/** A JobError when one of `others` is given beside the option `name`: `why` says why they exclude each other. */
export function refuseWith(options: JobOptions, others: readonly (keyof JobOptions)[], name: string, field: (name: string) => string, why: string): void {
  for (const other of others) {
    const given = options[other];
    if (given !== undefined && given !== null && given !== "") {
      throw new JobError(`${name} cannot be combined with ${field(other)}: ${why}; drop one of the two`, field(other));
    }
  }
}

/** Seconds since the epoch by the database clock, as the throttle windows count them. */
export async function databaseEpochSeconds(db: JobsDatabase, executor: Executor): Promise<number> {
  const { rows } = await executor.query<{ now: number | string }>(`SELECT ${forDialect(EPOCH_SECONDS, db.dialect, "epoch seconds")} AS now`, []);
  return Number(rows[0]?.now);
}

/** The stored idempotency key of a window at `epochSeconds`. */
export function windowKey(window: ThrottleWindow, epochSeconds: number): string {
  return `${KEY_PREFIX}${window.key}:${window.seconds}:${Math.floor(epochSeconds / window.seconds)}`;
}

/**
 * Gives each throttled job its window's key, all read at one instant of the database clock
 * (one read per call, none when no job is throttled). Run on the call's own executor, so
 * a caller's transaction sees the same clock as its insert. Where the database clock is this
 * process's own (SQLite), nothing is read and nothing to await comes back: an await before the
 * INSERT would outlive a caller's synchronous transaction (better-sqlite3's), and the INSERT
 * would run after it, kept by its rollback.
 */
export function keyThrottledJobs(db: JobsDatabase, jobs: readonly ThrottledJob[]): Promise<void> | undefined {
  if (!jobs.some((job) => job.throttle !== null)) return undefined;
  const key = (now: number) => {
    for (const job of jobs) if (job.throttle !== null) job.idempotencyKey = windowKey(job.throttle, now);
  };
  if (db.sql.localClock) return void key(Date.now() / 1000);
  return databaseEpochSeconds(db, db.executor).then(key);
}
