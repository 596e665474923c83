import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { isMissingTable } from "../flow/flow-overview.js";

/**
 * Records, in `tx`, the attempt that `ids` have just ended when they are about to run again: a
 * failure with attempts left (fail.ts), a lost worker's job reclaimed (reclaim.ts), an ended job
 * retried by an operator (admin.ts); in the transaction that reschedules them, while the row
 * still holds the attempt's number, start, worker (`locked_by`) and the error that ended it. A
 * job never started in this claim (`started_at` NULL) made no attempt, and an attempt already
 * recorded (a job cancelled while waiting for its retry, then retried) is not recorded twice. A job that succeeds at its first attempt never
 * comes here: its only attempt is its own row. `ended`: SQL for when the attempt ended (now).
 */
export async function recordAttempts(db: JobsDatabase, tx: Executor, ids: readonly number[], ended = db.sql.now): Promise<void> {
  if (ids.length === 0) return;
  await tx.query(
    `INSERT INTO ${db.attemptsTable} (job_id, attempt, started_at, finished_at, worker, error)
     SELECT id, attempts, started_at, ${ended}, locked_by, last_error FROM ${db.table}
     WHERE ${db.sql.inList("id", "$1")} AND started_at IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM ${db.attemptsTable} AS a WHERE a.job_id = ${db.table}.id AND a.attempt = ${db.table}.attempts)`,
    [[...ids]],
  );
}

/**
 * Deletes the recorded attempts of jobs that are gone (pruned, their history day dropped): the
 * attempts follow their job's retention. Reads the attempts table, which holds only jobs that
 * ran more than once, and probes both job tables by primary key.
 */
export async function pruneAttempts(db: JobsDatabase): Promise<number> {
  const attempts = db.attemptsTable;
  const gone = (table: string) => `NOT EXISTS (SELECT 1 FROM ${table} WHERE ${table}.id = ${attempts}.job_id)`;
  try {
    return (await db.executor.query(`DELETE FROM ${attempts} WHERE ${gone(db.table)} AND ${gone(db.historyTable)}`)).rowCount;
  } catch (error) {
    // Before migration 17 there is nothing to prune.
    if (isMissingTable(error)) return 0;
    throw error;
  }
}
