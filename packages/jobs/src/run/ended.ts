import { HISTORY_TABLE, type JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { STORED_COLUMNS, type StoredColumn } from "../core/job-row.js";
import { ensureDays } from "../maintenance/partitions.js";
import { isHistoryIdTaken, isMissingPartition } from "../core/sql-errors.js";
import { mendReusedIds } from "./reused-ids.js";
import { announceEnded } from "./end-wakeups.js";

/**
 * One place per job: the live table (`db.table`) holds the jobs that can still run (pending,
 * waiting, running), `jobs_history` the ended ones (done, failed, cancelled). Every write that
 * ends a job moves its row in that same statement or transaction, so a job is in exactly one
 * of the two at every instant and no ended row waits for maintenance in the hot table.
 */

/** The statuses of ended jobs, as SQL. */
export const ENDED_STATUSES = "('done', 'failed', 'cancelled')";

/** Ids per move statement: the list is one parameter, but its rows are read and written in one go. */
const MOVE_CHUNK = 1000;

/**
 * The stored columns as a SELECT list over `alias`, with `overrides` (column → SQL expression)
 * in place of some: what an ending statement inserts into history from the live row it removes.
 */
export function endingSelect(alias: string, overrides: Partial<Record<StoredColumn, string>> = {}): string {
  return STORED_COLUMNS.map((c) => (overrides[c] === undefined ? `${alias}.${c}` : `${overrides[c]} AS ${c}`)).join(", ");
}

/** The stored columns as a column list. */
export const STORED_LIST = STORED_COLUMNS.join(", ");

/**
 * Moves the rows among `ids` that have ended from the live table into history, on `tx`: the
 * transaction whose write ended them (the rows are already locked by it, so nothing can change
 * them in between). PostgreSQL moves them in one statement (DELETE … RETURNING feeding the
 * INSERT); SQLite and MariaDB copy, then delete, in the same transaction.
 */
export async function moveEnded(db: JobsDatabase, tx: Executor, ids: readonly number[]): Promise<void> {
  for (let from = 0; from < ids.length; from += MOVE_CHUNK) {
    const chunk = ids.slice(from, from + MOVE_CHUNK);
    const which = `${db.sql.inList("id", "$1")} AND status IN ${ENDED_STATUSES}`;
    if (db.dialect === "postgres") {
      await tx.query(
        `WITH gone AS (DELETE FROM ${db.table} WHERE ${which} RETURNING ${STORED_LIST})
         INSERT INTO ${db.historyTable} (${STORED_LIST}) SELECT ${STORED_LIST} FROM gone`,
        [chunk],
      );
    } else {
      await tx.query(`INSERT INTO ${db.historyTable} (${STORED_LIST}) SELECT ${STORED_LIST} FROM ${db.table} WHERE ${which}`, [chunk]);
      await tx.query(`DELETE FROM ${db.table} WHERE ${which}`, [chunk]);
    }
  }
}

/** How long partitions made ready are trusted before they are checked again. */
const READY_FOR_MS = 60 * 60 * 1000;
const readiness = new WeakMap<JobsDatabase, { until: number; made: Promise<void> }>();

/**
 * PostgreSQL: the history partitions of yesterday, today and tomorrow (by the server's clock)
 * exist. Awaited before a write that ends jobs, outside its transaction: an INSERT into a
 * partitioned table with no partition for its row fails, and a partition made inside the
 * ending transaction would wait on locks that transaction's own reads of history hold. Checked
 * again every hour, so a worker that runs across midnight finds the next day ready. Elsewhere
 * (one history table), nothing to do.
 */
export function historyReady(db: JobsDatabase): Promise<void> | undefined {
  if (db.dialect !== "postgres") return undefined;
  const known = readiness.get(db);
  if (known && known.until > Date.now()) return known.made;
  const made = ensureDays(db, -1, 1);
  readiness.set(db, { until: Date.now() + READY_FOR_MS, made });
  made.catch(() => readiness.delete(db));
  return made;
}

/**
 * Runs a write that ends jobs once history can take them (historyReady); a write refused for a
 * missing partition has the next one check the days again. Nothing is awaited before `write`
 * starts where there is nothing to make ready: a caller's synchronous SQLite transaction
 * allows no pause before its first statement.
 */
export async function whileEnding<T>(db: JobsDatabase, write: () => Promise<T>): Promise<T> {
  const ready = historyReady(db);
  if (ready) await ready;
  try {
    return ended(db, await write());
  } catch (error) {
    if (isMissingPartition(error)) readiness.delete(db);
    if (!isHistoryIdTaken(error, db.dialect, HISTORY_TABLE)) throw error;
  }
  // The write rolled back; once the ids are mended it can only meet the same refusal again if
  // another restart came in between, which its caller retries as any other error.
  await mendReusedIds(db);
  return ended(db, await write());
}

/** Passes a finished ending write's value through, telling this process's waitForJob calls. */
function ended<T>(db: JobsDatabase, value: T): T {
  announceEnded(db);
  return value;
}
