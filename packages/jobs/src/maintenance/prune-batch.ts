import type { JobsDatabase } from "../core/database.js";
import { keptForFlows } from "../dependencies/flow-prune.js";
import { forDialect, type PerDialect } from "../core/sql.js";

/** The finished states, the only ones prune deletes. */
export const FINISHED = ["done", "failed", "cancelled"] as const;
export type FinishedStatus = (typeof FINISHED)[number];

/** Rows one prune statement deletes by default: a short transaction, a few milliseconds. */
export const DEFAULT_PRUNE_BATCH = 1000;
export const MAX_PRUNE_BATCH = 100_000;

/**
 * The rule every backend's prune applies in the statement that picks the rows: a finished job
 * that a waiting job (dependencies) or an unfinished batch still needs is never deleted
 * (flow-prune.ts).
 */
function kept(db: JobsDatabase, alias: string): string {
  return ` AND ${keptForFlows(db, alias)}`;
}

/**
 * The statuses are written into the SQL as literals (they were checked against FINISHED): a
 * literal `status IN ('done')` lets the planner prove the jobs_finished partial index's
 * predicate, which a parameter in a generic plan does not. `$1` is the age in seconds, `$2`
 * the batch size.
 */
const BATCH: PerDialect<(db: JobsDatabase, statuses: readonly FinishedStatus[]) => string> = {
  // Oldest first along jobs_finished, LIMIT bounding the read and the locks; SKIP LOCKED passes
  // over a row an operator is retrying meanwhile instead of waiting on it. Only finished rows
  // are locked, which no claim touches. The ids as an array (an InitPlan): with `id IN (…)` the
  // planner may hash the batch and scan the whole table for it, every batch.
  postgres: (db, statuses) => `
    DELETE FROM ${db.table} WHERE id = ANY (ARRAY(
      SELECT j.id FROM ${db.table} AS j
      WHERE j.status IN (${literals(statuses)}) AND j.finished_at < ${db.sql.nowPlus("$1", "-")}${kept(db, "j")}
      ORDER BY j.finished_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
  // The index's own predicate first (db.sql.finished): SQLite reads jobs_finished only for a
  // WHERE that repeats it, which a subset of the statuses does not.
  sqlite: (db, statuses) => `
    DELETE FROM ${db.table} WHERE id IN (
      SELECT j.id FROM ${db.table} AS j
      WHERE ${db.sql.finished("j")} AND j.status IN (${literals(statuses)}) AND j.finished_at < ${db.sql.nowPlus("$1", "-")}${kept(db, "j")}
      ORDER BY j.finished_at LIMIT $2)`,
  // MariaDB cannot read the table a DELETE deletes from in a subquery: the ids are picked
  // first (per status, a range of (status, finished_at) read in order: no sort of every
  // finished row), then deleted with the conditions checked again. READ COMMITTED sessions
  // take no gap locks, so inserts and claims never wait on the range.
  mysql: (db, statuses) => `
    SELECT j.id FROM ${db.table} AS j
    WHERE j.status = '${statuses[0]}' AND j.finished_at < ${db.sql.nowPlus("$1", "-")}${kept(db, "j")}
    ORDER BY j.finished_at LIMIT $2`,
};

function literals(statuses: readonly FinishedStatus[]): string {
  return statuses.map((s) => `'${s}'`).join(", ");
}

/** Deletes up to `batch` finished jobs of `statuses` older than `olderThan` seconds, in one short statement; returns how many. */
export async function pruneBatch(db: JobsDatabase, olderThan: number, statuses: readonly FinishedStatus[], batch: number): Promise<number> {
  const sql = forDialect(BATCH, db.dialect, "prune");
  if (db.dialect !== "mysql") return (await db.executor.query(sql(db, statuses), [olderThan, batch])).rowCount;
  let deleted = 0;
  for (const status of statuses) {
    const { rows } = await db.executor.query<{ id: number | string }>(sql(db, [status]), [olderThan, batch - deleted]);
    if (rows.length === 0) continue;
    const ids = rows.map((r) => Number(r.id));
    const { rowCount } = await db.executor.query(
      `DELETE FROM ${db.table} WHERE id IN (${ids.map((_, i) => `$${i + 2}`).join(", ")}) AND status = '${status}' AND finished_at < ${db.sql.nowPlus("$1", "-")}`,
      [olderThan, ...ids],
    );
    deleted += rowCount;
    if (deleted >= batch) break;
  }
  return deleted;
}
