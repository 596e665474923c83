import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { ENDED_STATUSES } from "../run/ended.js";
import { countedRows, countsUpsert, minuteRows, minutesUpsert } from "../migrations/postgres-counts.js";
import { countsFrom as sqliteCountsFrom, minutesFrom as sqliteMinutesFrom } from "../migrations/sqlite-counts.js";
import { countsFrom as mysqlCountsFrom, minutesFrom as mysqlMinutesFrom } from "../migrations/mysql-counts.js";

/** Ids per uncount statement, as moveEnded chunks them (MariaDB spells the list as one placeholder per id). */
const UNCOUNT_CHUNK = 1000;

/**
 * Takes the legacy ended rows among `ids` (done, failed or cancelled jobs an older version left
 * in the live table) out of jobs_counts and jobs_minutes, on `tx`: the transaction that is about
 * to delete, move or retry exactly those rows. Since migration 15 only the history table's
 * triggers count; legacy rows were counted once, by that migration, so whatever takes one away
 * calls this first, with the same ids, in the same transaction. PostgreSQL and MariaDB lock the
 * rows as they read them: no other transaction changes them before the caller's write.
 */
export async function uncountLive(db: JobsDatabase, tx: Executor, ids: readonly number[]): Promise<void> {
  for (let from = 0; from < ids.length; from += UNCOUNT_CHUNK) {
    const chunk = ids.slice(from, from + UNCOUNT_CHUNK);
    const legacy = `SELECT queue, tenant, status, finished_at FROM ${db.table} WHERE ${db.sql.inList("id", "$1")} AND status IN ${ENDED_STATUSES}`;
    if (db.dialect === "postgres") {
      await tx.query(
        `WITH gone AS MATERIALIZED (${legacy} FOR UPDATE),
           counted AS (${countsUpsert(db.countsTable, countedRows("gone", -1))})
         ${minutesUpsert(db.minutesTable, minuteRows("gone", -1))}`,
        [chunk],
      );
    } else if (db.dialect === "sqlite") {
      await tx.query(sqliteCountsFrom(db.countsTable, `(${legacy}) AS gone`, -1), [chunk]);
      await tx.query(sqliteMinutesFrom(db.minutesTable, `(${legacy}) AS gone`, -1), [chunk]);
    } else {
      await tx.query(`SELECT id FROM ${db.table} WHERE ${db.sql.inList("id", "$1")} AND status IN ${ENDED_STATUSES} FOR UPDATE`, [chunk]);
      await tx.query(mysqlCountsFrom(db.countsTable, `(${legacy}) AS gone`, -1), [chunk]);
      await tx.query(mysqlMinutesFrom(db.minutesTable, `(${legacy}) AS gone`, -1), [chunk]);
    }
  }
}
