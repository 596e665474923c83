import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { keptForFlows } from "../dependencies/flow-prune.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import { ENDED_STATUSES } from "../run/ended.js";
import { uncountLive } from "./uncount.js";

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
function kept(db: JobsDatabase, alias: string, marked = true): string {
  return ` AND ${keptForFlows(db, alias, marked)}`;
}

/**
 * The statuses are written into the SQL as literals (they were checked against FINISHED): a
 * literal `status IN ('done')` lets the planner prove a partial index's predicate, which a
 * parameter in a generic plan does not. `$1` is the age in seconds, `$2` the batch size.
 * These delete from the history table, whose triggers take the rows out of the counts.
 */
const BATCH: PerDialect<(db: JobsDatabase, statuses: readonly FinishedStatus[]) => string> = {
  // Oldest first (partitions by finished time: the oldest day's first), LIMIT bounding the read
  // and the locks; SKIP LOCKED passes over a row an operator is retrying meanwhile instead of
  // waiting on it. The ids as an array (an InitPlan): with `id IN (…)` the planner may hash the
  // batch and scan the whole table for it, every batch.
  postgres: (db, statuses) => `
    DELETE FROM ${db.historyTable} WHERE id = ANY (ARRAY(
      SELECT j.id FROM ${db.historyTable} AS j
      WHERE j.status IN (${literals(statuses)}) AND j.finished_at <= ${db.sql.nowPlus("$1", "-")}${kept(db, "j", false)}
      ORDER BY j.finished_at LIMIT $2 FOR UPDATE SKIP LOCKED))`,
  sqlite: (db, statuses) => `
    DELETE FROM ${db.historyTable} WHERE id IN (
      SELECT j.id FROM ${db.historyTable} AS j
      WHERE j.status IN (${literals(statuses)}) AND j.finished_at <= ${db.sql.nowPlus("$1", "-")}${kept(db, "j", false)}
      ORDER BY j.finished_at LIMIT $2)`,
  // MariaDB cannot read the table a DELETE deletes from in a subquery: the ids are picked
  // first (per status), then deleted with the conditions checked again. READ COMMITTED
  // sessions take no gap locks, so ending writes never wait on the range.
  mysql: (db, statuses) => `
    SELECT j.id FROM ${db.historyTable} AS j
    WHERE j.status = '${statuses[0]}' AND j.finished_at <= ${db.sql.nowPlus("$1", "-")}${kept(db, "j", false)}
    ORDER BY j.finished_at LIMIT $2`,
};

/**
 * Picks legacy ended rows of the live table (an older version's, until the online upgrade
 * moved them), oldest first, locking them where the backend can: `$1` the age, `$2` how many,
 * `bound` more conditions on `j`. SQLite repeats jobs_finished's predicate so that it reads
 * that index; MariaDB picks one status at a time (a range of its (status, finished_at) index,
 * read in order).
 */
const LEGACY: PerDialect<(db: JobsDatabase, statuses: readonly FinishedStatus[], bound: string) => string> = {
  postgres: (db, statuses, bound) => `
    SELECT j.id FROM ${db.table} AS j
    WHERE j.status IN (${literals(statuses)}) AND j.finished_at <= ${db.sql.nowPlus("$1", "-")}${bound}${kept(db, "j")}
    ORDER BY j.finished_at LIMIT $2 FOR UPDATE OF j SKIP LOCKED`,
  sqlite: (db, statuses, bound) => `
    SELECT j.id FROM ${db.table} AS j
    WHERE ${db.sql.finished("j")} AND j.status IN (${literals(statuses)}) AND j.finished_at <= ${db.sql.nowPlus("$1", "-")}${bound}${kept(db, "j")}
    ORDER BY j.finished_at LIMIT $2`,
  mysql: (db, statuses, bound) => `
    SELECT j.id FROM ${db.table} AS j
    WHERE j.status = '${statuses[0]}' AND j.finished_at <= ${db.sql.nowPlus("$1", "-")}${bound}${kept(db, "j")}
    ORDER BY j.finished_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
};

function literals(statuses: readonly FinishedStatus[]): string {
  return statuses.map((s) => `'${s}'`).join(", ");
}

/** Deletes up to `batch` ended jobs of `statuses` older than `olderThan` seconds from the history table, in one short statement; returns how many. */
export async function pruneBatch(db: JobsDatabase, olderThan: number, statuses: readonly FinishedStatus[], batch: number): Promise<number> {
  const sql = forDialect(BATCH, db.dialect, "prune");
  if (db.dialect !== "mysql") return (await db.executor.query(sql(db, statuses), [olderThan, batch])).rowCount;
  let deleted = 0;
  for (const status of statuses) {
    const { rows } = await db.executor.query<{ id: number | string }>(sql(db, [status]), [olderThan, batch - deleted]);
    if (rows.length === 0) continue;
    const ids = rows.map((r) => Number(r.id));
    const { rowCount } = await db.executor.query(
      `DELETE FROM ${db.historyTable} WHERE id IN (${ids.map((_, i) => `$${i + 2}`).join(", ")}) AND status = '${status}' AND finished_at <= ${db.sql.nowPlus("$1", "-")}`,
      [olderThan, ...ids],
    );
    deleted += rowCount;
    if (deleted >= batch) break;
  }
  return deleted;
}

/**
 * One transaction over up to `batch` legacy ended rows of the live table of `statuses`, older
 * than `olderThan` seconds (and `bound`, with its `params` from `$3`): picks and locks them,
 * takes them out of the counts (uncountLive), then `act`s on them (deletes or moves them: every
 * one of them, as they are locked). Returns how many.
 */
export async function legacyBatch(
  db: JobsDatabase,
  olderThan: number,
  statuses: readonly FinishedStatus[],
  batch: number,
  act: (tx: Executor, ids: number[]) => Promise<void>,
  bound = { sql: "", params: [] as unknown[] },
): Promise<number> {
  const sql = forDialect(LEGACY, db.dialect, "prune");
  return db.executor.transaction(async (tx) => {
    const ids: number[] = [];
    for (const picked of db.dialect === "mysql" ? statuses.map((s) => [s]) : [statuses]) {
      const { rows } = await tx.query<{ id: number | string }>(sql(db, picked, bound.sql), [olderThan, batch - ids.length, ...bound.params]);
      ids.push(...rows.map((r) => Number(r.id)));
      if (ids.length >= batch) break;
    }
    if (ids.length === 0) return 0;
    await uncountLive(db, tx, ids);
    await act(tx, ids);
    return ids.length;
  });
}

/** Ids per DELETE of legacy rows (MariaDB spells the list as one placeholder per id). */
const DELETE_CHUNK = 1000;

/** Deletes up to `batch` legacy ended rows of the live table (see legacyBatch), their counts with them; returns how many. */
export function pruneLegacyBatch(db: JobsDatabase, olderThan: number, statuses: readonly FinishedStatus[], batch: number): Promise<number> {
  return legacyBatch(db, olderThan, statuses, batch, async (tx, ids) => {
    for (let from = 0; from < ids.length; from += DELETE_CHUNK) {
      await tx.query(`DELETE FROM ${db.table} WHERE ${db.sql.inList("id", "$1")} AND status IN ${ENDED_STATUSES}`, [ids.slice(from, from + DELETE_CHUNK)]);
    }
  });
}
