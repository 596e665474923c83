import type { JobsDatabase } from "../core/database.js";
import { eventTables } from "./event-lock.js";

/**
 * Event retention, run by `prune` and `pruneHistory` with their `olderThan`: deletes the events
 * sent more than `olderThan` seconds ago (by then a job that waits for one has either had it or
 * was enqueued long before it), and the waits of jobs no longer in the live table (cancelled
 * while waiting, then never sent their event). Returns how many events went.
 */
export async function pruneEvents(db: JobsDatabase, olderThan: number): Promise<number> {
  const { events, waits } = eventTables(db);
  const { rowCount } = await db.executor.query(`DELETE FROM ${events} WHERE created_at < ${db.sql.nowPlus("$1", "-")}`, [olderThan]);
  await db.executor.query(`DELETE FROM ${waits} WHERE NOT EXISTS (SELECT 1 FROM ${db.table} AS j WHERE j.id = ${waits}.job_id)`);
  return rowCount;
}
