import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import type { DatabaseOptions } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import type { DialectName } from "../db/executor.js";
import { qualified } from "../db/identifiers.js";
import { isMissingTable } from "../flow/flow-overview.js";
import { checkName } from "../base/validate.js";
import { QUEUES_TABLE } from "../migrations/queues.js";

/**
 * Pausing a queue is a row in jobs_queues (migration 21); resuming deletes it. Each write wakes
 * the workers with an empty payload — what they also get after a lost LISTEN connection — which
 * makes them read the paused queues again at once instead of at their next poll: NOTIFY on
 * PostgreSQL (sent at commit, so a pause inside the caller's transaction is seen when it lands),
 * in-process elsewhere.
 */
const PAUSE: Record<DialectName, (t: string, now: string) => string> = {
  postgres: (t) =>
    `WITH ins AS (INSERT INTO ${t} (queue) VALUES ($1) ON CONFLICT (queue) DO NOTHING RETURNING queue)
     SELECT count(*) AS n, pg_notify($2, '')::text AS woke FROM ins`,
  sqlite: (t, now) => `INSERT OR IGNORE INTO ${t} (queue, paused_at) VALUES ($1, ${now})`,
  mysql: (t, now) => `INSERT IGNORE INTO ${t} (queue, paused_at) VALUES ($1, ${now})`,
};

const RESUME: Record<DialectName, (t: string, now: string) => string> = {
  postgres: (t) =>
    `WITH del AS (DELETE FROM ${t} WHERE queue = $1 RETURNING queue)
     SELECT count(*) AS n, pg_notify($2, '')::text AS woke FROM del`,
  sqlite: (t) => `DELETE FROM ${t} WHERE queue = $1`,
  mysql: (t) => `DELETE FROM ${t} WHERE queue = $1`,
};

function queuesTable(db: JobsDatabase): string {
  return qualified(db.dialect, db.schema, QUEUES_TABLE);
}

/** Runs a pause or resume statement; true when it changed the row (the queue was not already in that state). */
async function writeState(db: JobsDatabase, statements: Record<DialectName, (t: string, now: string) => string>, queue: string): Promise<boolean> {
  const sql = statements[db.dialect](queuesTable(db), db.sql.now);
  if (db.dialect === "postgres") {
    const { rows } = await db.executor.query<{ n: number | string }>(sql, [queue, db.channel]);
    return Number(rows[0]?.n ?? 0) > 0;
  }
  const { rowCount } = await db.executor.query(sql, [queue]);
  db.executor.notify?.(db.channel, "");
  return rowCount > 0;
}

/**
 * Pauses `queue`: no worker starts another of its jobs (within one poll interval, at once where
 * the workers are woken); running jobs finish. The pause is stored, so it outlives restarts.
 * A queue exists by its name: pausing one with no jobs yet holds back the jobs it will get.
 * Resolves false when the queue was already paused.
 */
export async function pauseQueue(queue: string, options: DatabaseOptions = {}): Promise<boolean> {
  checkOptions(options, DATABASE_OPTION_KEYS, "pauseQueue");
  const name = checkName(queue, "queue");
  return writeState(resolveDb(options.db), PAUSE, name);
}

/** Lets workers take `queue`'s jobs again. Resolves false when the queue was not paused. */
export async function resumeQueue(queue: string, options: DatabaseOptions = {}): Promise<boolean> {
  checkOptions(options, DATABASE_OPTION_KEYS, "resumeQueue");
  const name = checkName(queue, "queue");
  return writeState(resolveDb(options.db), RESUME, name);
}

/** The paused queues, by name; none on a schema before migration 21 (nothing can be paused there). */
export async function readPausedQueues(db: JobsDatabase): Promise<Set<string>> {
  try {
    const { rows } = await db.executor.query<{ queue: string }>(`SELECT queue FROM ${queuesTable(db)}`, [], "paused_queues");
    return new Set(rows.map((row) => row.queue));
  } catch (error) {
    if (isMissingTable(error)) return new Set();
    throw error;
  }
}
