import { stepsTable } from "../run/step-store.js";
import { progressTable } from "../run/report-progress.js";
import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { qualified } from "../db/identifiers.js";
import { JobError } from "../base/errors.js";
import { isMissingPartition } from "../core/sql-errors.js";
import { countedRows, countsUpsert, minuteRows, minutesUpsert } from "../migrations/postgres-counts.js";
import { moveEnded, STORED_LIST } from "../run/ended.js";
import { legacyBatch, type FinishedStatus } from "./prune-batch.js";

/**
 * The history table (migrations 8 and 14) holds the ended jobs: every write that ends a job
 * moves it there (run/ended.ts). On PostgreSQL it is range-partitioned by finished time, one
 * partition per UTC day, so that retention drops whole partitions (instant, no row deleted,
 * nothing for vacuum) instead of deleting rows one by one; on SQLite and MariaDB it is one table.
 */
import { HISTORY_TABLE } from "../core/database.js";
import { ensurePartitions, listPartitions, nextDay, partitionName } from "./partitions.js";
export { HISTORY_TABLE };
export { ensureDays, ensurePartitions, listPartitions, type HistoryPartition } from "./partitions.js";

/** PostgreSQL's SQLSTATE for a table that does not exist (a partition another pruneHistory dropped). */
const UNDEFINED_TABLE = "42P01";

/** How long a DROP of a partition waits for its lock on the history table before giving up (it is retried at the next run). */
const DROP_LOCK_TIMEOUT = "10s";

/** History's partitions (days) are PostgreSQL's: elsewhere, a JobError that says what to do instead. */
export function checkPartitionsDialect(db: JobsDatabase, where: string, field: string): void {
  if (db.dialect === "postgres") return;
  const backend = db.dialect === "mysql" ? "MariaDB" : "SQLite";
  throw new JobError(
    `${where}: history partitions are PostgreSQL only (its history table is partitioned by the UTC day jobs ended); on ${backend} the history table is one table and prune() deletes its ended jobs: leave ${field} out`,
    field,
  );
}

/**
 * Moves up to `batch` legacy ended rows of `statuses` (those an older version left in the live
 * table) that ended more than `olderThan` seconds ago into the history table, oldest first,
 * applying the same flow rule as prune (a job a waiting job or an unfinished batch still needs
 * stays). One transaction per batch: the rows are locked, taken out of the counts (history's
 * triggers count them again as they arrive) and moved (run/ended.ts, moveEnded), so a job is in
 * exactly one of the two tables, counted once, at every instant.
 */
export async function moveBatch(db: JobsDatabase, olderThan: number, statuses: readonly FinishedStatus[], batch: number): Promise<number> {
  const move = (tx: Executor, ids: number[]) => moveEnded(db, tx, ids);
  if (db.dialect !== "postgres") return legacyBatch(db, olderThan, statuses, batch, move);
  for (;;) {
    // The days this batch will touch get their partition first: a row with no partition to go
    // to would fail the whole statement.
    const { rows } = await db.executor.query<{ day: string }>(
      `SELECT DISTINCT to_char(p.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM (
         SELECT j.finished_at FROM ${db.table} AS j
         WHERE j.status IN (${statuses.map((s) => `'${s}'`).join(", ")}) AND j.finished_at <= ${db.sql.nowPlus("$1", "-")}
         ORDER BY j.finished_at LIMIT $2) AS p ORDER BY day`,
      [olderThan, batch],
    );
    if (rows.length === 0) return 0;
    const days = rows.map((r) => r.day);
    await ensurePartitions(db, days);
    try {
      // Rows past the last day made ready wait for the next batch.
      return await legacyBatch(db, olderThan, statuses, batch, move, {
        sql: " AND j.finished_at < $3::timestamptz",
        params: [`${nextDay(days.at(-1)!)}T00:00:00Z`],
      });
    } catch (error) {
      // A row of a day between two made ready (written meanwhile with an old finish time): the
      // transaction moved nothing; the next turn's read of the days includes it.
      if (!isMissingPartition(error)) throw error;
    }
  }
}

/**
 * Drops the partitions whose whole day ended more than `olderThan` seconds ago (by the
 * database's clock); returns their days. Each DROP waits at most DROP_LOCK_TIMEOUT for the lock
 * on the history table (a long read of it would otherwise queue every reader behind the DROP).
 */
export async function dropPartitions(db: JobsDatabase, olderThan: number): Promise<string[]> {
  const { rows } = await db.executor.query<{ cutoff: string }>(
    `SELECT to_char((now() - make_interval(secs => $1)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cutoff`,
    [olderThan],
  );
  const cutoff = Date.parse(rows[0]!.cutoff);
  const dropped: string[] = [];
  for (const { day } of await listPartitions(db)) {
    if (Date.parse(`${nextDay(day)}T00:00:00Z`) > cutoff) continue;
    if (await dropPartition(db, qualified("postgres", db.schema, partitionName(day)))) dropped.push(day);
  }
  return dropped;
}

/**
 * Drops one partition, its rows' counts with it: a DROP fires no trigger, so the transaction
 * that drops it subtracts what it held from jobs_counts and jobs_minutes first, with the
 * partition locked against writes (SHARE: readers go on) from the count to the drop. False when
 * another pruneHistory dropped it first.
 */
async function dropPartition(db: JobsDatabase, partition: string): Promise<boolean> {
  try {
    await db.executor.transaction(async (tx) => {
      await tx.query(`SET LOCAL lock_timeout = '${DROP_LOCK_TIMEOUT}'`);
      await tx.query(`LOCK TABLE ${partition} IN SHARE MODE`);
      await tx.query(countsUpsert(db.countsTable, countedRows(partition, -1)));
      await tx.query(minutesUpsert(db.minutesTable, minuteRows(partition, -1)));
      // A DROP fires no trigger either: the steps of its jobs go with it here (migrations/steps.ts).
      await tx.query(`DELETE FROM ${stepsTable(db)} WHERE job_id IN (SELECT id FROM ${partition})`);
      // And their live progress (migrations/progress.ts).
      await tx.query(`DELETE FROM ${progressTable(db)} WHERE job_id IN (SELECT id FROM ${partition})`);
      await tx.query(`DROP TABLE ${partition}`);
    });
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === UNDEFINED_TABLE) return false;
    throw error;
  }
}

/**
 * Brings an ended failed or cancelled job back from the history table into the live table,
 * unchanged, in the caller's transaction (retryJob then puts it back in its queue); false when
 * there is none. History's delete trigger takes it out of the counts. MariaDB locks the row
 * first: its INSERT … SELECT reads without locks, and two retries would both copy it.
 */
export async function restoreEnded(db: JobsDatabase, tx: Executor, id: number, tenant: string | null): Promise<boolean> {
  const which = `id = $1 AND status IN ('failed', 'cancelled')${tenant === null ? "" : " AND tenant = $2"}`;
  const params = tenant === null ? [id] : [id, tenant];
  if (db.dialect === "postgres") {
    const { rowCount } = await tx.query(
      `WITH back AS (DELETE FROM ${db.historyTable} WHERE ${which} RETURNING ${STORED_LIST})
       INSERT INTO ${db.table} (${STORED_LIST}) OVERRIDING SYSTEM VALUE SELECT ${STORED_LIST} FROM back`,
      params,
    );
    return rowCount > 0;
  }
  if (db.dialect === "mysql" && (await tx.query(`SELECT id FROM ${db.historyTable} WHERE ${which} FOR UPDATE`, params)).rows.length === 0) return false;
  const { rowCount } = await tx.query(`INSERT INTO ${db.table} (${STORED_LIST}) SELECT ${STORED_LIST} FROM ${db.historyTable} WHERE ${which}`, params);
  if (rowCount === 0) return false;
  await tx.query(`DELETE FROM ${db.historyTable} WHERE ${which}`, params);
  return true;
}
