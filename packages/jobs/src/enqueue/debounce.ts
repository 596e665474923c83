import { JobError } from "../base/errors.js";
import { checkKnownOptions, checkOptionalKey, describe, MAX_NAME_LENGTH } from "../base/validate.js";
import type { JobsDatabase } from "../core/database.js";
import type { DebounceWindow, JobOptions } from "../core/options.js";
import { isSerializationFailure } from "../core/sql-errors.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import type { Executor } from "../db/executor.js";
import { qualified } from "../db/identifiers.js";
import { DEBOUNCE_TABLE } from "../migrations/debounce.js";
import { dueAfter } from "../run/due.js";
import { snapshotError } from "./key-conflicts.js";
import { refuseWith } from "./throttle.js";

/** 366 days, for `seconds` and `maxWait`: a longer wait is a schedule, not a debounce. */
export const MAX_DEBOUNCE_SECONDS = 366 * 86_400;

const DEBOUNCE_FIELDS = ["key", "seconds", "maxWait"];

/** What a debounced enqueue needs of its checked job. */
export interface DebouncedJob {
  debounce: DebounceWindow | null;
  payload: string | null;
  task: string;
  queue: string;
  tenant: string | null;
}

function checkWait(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0 || value > MAX_DEBOUNCE_SECONDS) {
    throw new JobError(`${field} must be a number of seconds > 0 and ≤ ${MAX_DEBOUNCE_SECONDS} (366 days), got ${describe(value)}`, field);
  }
  return value;
}

/**
 * The `debounce` option checked, or null without one. `where` is the item's index in
 * enqueueMany or a batch: debounce is refused there, as with the options below, since an
 * existing job stands in for a debounced one (a flow or a batch would count a job it did not make).
 */
export function checkDebounce(options: JobOptions, field: (name: string) => string, where: number | null): DebounceWindow | null {
  const value: unknown = options.debounce;
  if (value === undefined) return null;
  const name = field("debounce");
  if (where !== null) {
    throw new JobError(
      `${name}: debounce works with enqueue only, one job per call (not in enqueueMany, a batch or a flow); enqueue the debounced job by itself`,
      name,
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new JobError(`${name} must be an object { key, seconds, maxWait? }, got ${describe(value)}`, name);
  }
  checkKnownOptions(value, DEBOUNCE_FIELDS, name);
  const { key, seconds, maxWait } = value as { key?: unknown; seconds?: unknown; maxWait?: unknown };
  if (typeof key !== "string" || key.length === 0) throw new JobError(`${name}.key must be a non-empty string, got ${describe(key)}`, `${name}.key`);
  checkOptionalKey(key, `${name}.key`, MAX_NAME_LENGTH);
  const window: DebounceWindow = { key, seconds: checkWait(seconds, `${name}.seconds`) };
  if (maxWait !== undefined) window.maxWait = checkWait(maxWait, `${name}.maxWait`);
  const others = ["idempotencyKey", "dedupKey", "throttle", "availableIn", "dependsOn"] as const;
  refuseWith(options, others, name, field, "a debounced job's start and identity are its key's");
  return window;
}

/** The delay of a new debounced job: `seconds`, or `maxWait` when that is shorter. */
export function firstDelay(window: DebounceWindow): number {
  return Math.min(window.seconds, window.maxWait ?? Infinity);
}

/**
 * Locks the key's row (made when missing) and reads the job it names. Every debounced enqueue
 * of a key runs this first, so they take turns on the row lock until each commits: the last
 * to commit is the last to write the payload. SQLite's transactions hold the file's write lock.
 */
const LOCK_KEY: PerDialect<(table: string) => string[]> = {
  postgres: (t) => [
    `INSERT INTO ${t} AS d (debounce_key, job_id) VALUES ($1, NULL) ON CONFLICT (debounce_key) DO UPDATE SET job_id = d.job_id RETURNING job_id`,
  ],
  sqlite: (t) => [`INSERT INTO ${t} (debounce_key, job_id) VALUES ($1, NULL) ON CONFLICT (debounce_key) DO UPDATE SET job_id = job_id RETURNING job_id`],
  mysql: (t) => [
    `INSERT INTO ${t} (debounce_key, job_id) VALUES ($1, NULL) ON DUPLICATE KEY UPDATE job_id = job_id`,
    `SELECT job_id FROM ${t} WHERE debounce_key = $1 FOR UPDATE`,
  ],
};

/**
 * The named job, locked where rows can be (a claim skips it, or is waited for and then seen):
 * a claim that commits first makes it running, and the enqueue makes a new job instead.
 */
const READ_JOB: PerDialect<(table: string) => string> = {
  postgres: (t) => `SELECT id, tenant, task, queue, status, attempts FROM ${t} WHERE id = $1 FOR UPDATE`,
  sqlite: (t) => `SELECT id, tenant, task, queue, status, attempts FROM ${t} WHERE id = $1`,
  mysql: (t) => `SELECT id, tenant, task, queue, status, attempts FROM ${t} WHERE id = $1 FOR UPDATE`,
};

/** `$4` (maxWait, or null), `created_at + $4 seconds`, the smaller of two times, and the payload parameter, per backend. */
const PARTS: PerDialect<{ wait: string; afterFirst: string; least: string; payload: string }> = {
  postgres: { wait: "$4::float8", afterFirst: "created_at + make_interval(secs => $4::float8)", least: "LEAST", payload: "$2::jsonb" },
  sqlite: { wait: "$4", afterFirst: "created_at + CAST(ROUND($4 * 1000.0) AS INTEGER)", least: "MIN", payload: "$2" },
  mysql: { wait: "$4", afterFirst: "created_at + INTERVAL ROUND($4 * 1000000) MICROSECOND", least: "LEAST", payload: "$2" },
};

/**
 * The trailing push: the new payload, due `$3` seconds from now, never later than `$4` seconds
 * after the job was first enqueued. Only a job still pending that has never started
 * (`attempts = 0`; a snoozed or retried job has started). Changes run_at of an existing job, and due.
 */
function pushSql(db: JobsDatabase): string {
  const { wait, afterFirst, least, payload } = forDialect(PARTS, db.dialect, "debounce push");
  const later = db.sql.nowPlus("$3");
  const runAt = `CASE WHEN ${wait} IS NULL THEN ${later} ELSE ${least}(${later}, ${afterFirst}) END`;
  // Its due flag with it (run/due.ts): out of the claim index while it waits.
  return `UPDATE ${db.table}
    SET payload = ${payload}, due = ${dueAfter(db, runAt)}, run_at = ${runAt}, updated_at = ${db.sql.now}
    WHERE id = $1 AND status = 'pending' AND attempts = 0`;
}

type Holder = { id: number | string; tenant: string | null; task: string; queue: string; status: string; attempts: number | string };

/**
 * Enqueues a debounced job: the key's job while it is pending and unstarted, its payload
 * replaced and its start pushed back; otherwise a new job (`insert`, in the same transaction),
 * which the key then names. Returns the job's id.
 */
export async function enqueueDebounced(db: JobsDatabase, job: DebouncedJob, insert: (tx: Executor) => Promise<number>): Promise<number> {
  const window = job.debounce as DebounceWindow;
  if (db.executor.callerTransactionOpen?.()) {
    // Its statements cannot all run inside a synchronous transaction (better-sqlite3's ends
    // before the first await), and run after it they would lose its rollback.
    throw new JobError(
      "debounce: enqueue cannot join the transaction open on this SQLite handle (a debounced enqueue takes several statements); enqueue the debounced job after your transaction commits",
      "debounce",
    );
  }
  const table = qualified(db.dialect, db.schema, DEBOUNCE_TABLE);
  try {
    return await db.executor.transaction(async (tx) => {
      let held: number | string | null = null;
      for (const sql of forDialect(LOCK_KEY, db.dialect, "debounce lock")(table)) {
        const { rows } = await tx.query<{ job_id: number | string | null }>(sql, [window.key]);
        if (rows[0]) held = rows[0].job_id;
      }
      if (held !== null && (await pushed(db, tx, Number(held), job, window))) return Number(held);
      const id = await insert(tx);
      await tx.query(`UPDATE ${table} SET job_id = $2 WHERE debounce_key = $1`, [window.key, id]);
      return id;
    });
  } catch (error) {
    if (isSerializationFailure(error, db.dialect)) throw snapshotError("debounce");
    throw error;
  }
}

/** Whether the key's job `id` was still pending and unstarted, and so took the new payload and start. */
async function pushed(db: JobsDatabase, tx: Executor, id: number, job: DebouncedJob, window: DebounceWindow): Promise<boolean> {
  const { rows } = await tx.query<Holder>(forDialect(READ_JOB, db.dialect, "debounce read")(db.table), [id]);
  const holder = rows[0];
  if (!holder || holder.status !== "pending" || Number(holder.attempts) !== 0) return false;
  if ((holder.tenant ?? null) !== job.tenant) {
    // Keys are shared by all tenants; a colliding key must never hand out another tenant's job.
    throw new JobError("debounce.key is already used by a pending job of another tenant; include the tenant in the key", "debounce.key");
  }
  if (holder.task !== job.task || holder.queue !== job.queue) {
    throw new JobError(
      `debounce.key ${describe(window.key)} is held by a pending job of task ${describe(holder.task)} in queue ${describe(holder.queue)}; give each task and queue its own keys`,
      "debounce.key",
    );
  }
  const { rowCount } = await tx.query(pushSql(db), [id, job.payload, window.seconds, window.maxWait ?? null]);
  return rowCount > 0;
}

/**
 * Deletes the keys whose job has ended (it is in history): such a row makes no difference — the
 * key's next enqueue makes a new job either way — but keys used once would otherwise stay
 * forever. Only jobs in history, never "not in the live table": a key locked by an enqueue whose
 * new job is not committed yet must keep its row. Called by prune().
 */
const PRUNE_KEYS: PerDialect<(keys: string, history: string) => string> = {
  postgres: (k, h) => `DELETE FROM ${k} AS d WHERE EXISTS (SELECT 1 FROM ${h} AS h WHERE h.id = d.job_id)`,
  sqlite: (k, h) => `DELETE FROM ${k} WHERE EXISTS (SELECT 1 FROM ${h} AS h WHERE h.id = ${k}.job_id)`,
  mysql: (k, h) => `DELETE FROM ${k} WHERE EXISTS (SELECT 1 FROM ${h} AS h WHERE h.id = ${k}.job_id)`,
};

export async function pruneDebounceKeys(db: JobsDatabase): Promise<number> {
  const sql = forDialect(PRUNE_KEYS, db.dialect, "prune debounce keys")(qualified(db.dialect, db.schema, DEBOUNCE_TABLE), db.historyTable);
  return (await db.executor.query(sql, [])).rowCount;
}
