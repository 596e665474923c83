import type { DialectName } from "../db/executor.js";
import {
  MYSQL_COUNT_TRIGGERS,
  MYSQL_MINUTE_TRIGGERS,
  countTriggers as mysqlCountTriggers,
  countsFrom as mysqlCountsFrom,
  minuteTriggers as mysqlMinuteTriggers,
  minutesFrom as mysqlMinutesFrom,
} from "./mysql-counts.js";
import { countedRows, countingFunction, countsUpsert, minuteRows, minutesUpsert } from "./postgres-counts.js";
import {
  COUNT_TRIGGERS,
  MINUTE_TRIGGERS,
  countTriggers as sqliteCountTriggers,
  countsFrom as sqliteCountsFrom,
  minuteTriggers as sqliteMinuteTriggers,
  minutesFrom as sqliteMinutesFrom,
} from "./sqlite-counts.js";
import type { Migration, SchemaNames } from "./types.js";

/**
 * Migration 15: jobs_counts and jobs_minutes count the ended jobs where they are inserted, the
 * history table (migration 14), not the live table: claims, start writes, lease extensions and
 * retries of live jobs pay no trigger. The live table keeps none.
 *
 * PostgreSQL counts per statement from transition tables, INSERT included (a completion moves a
 * batch of jobs in one statement: one upsert per queue, tenant and status, not one per job);
 * SQLite and MariaDB keep row triggers (migrations 7, 10, 11), now on the history table.
 *
 * The counts are then computed again from what is ended now: the history rows and the legacy
 * ended rows an older version left in the live table (the online upgrade moves them later).
 * Those legacy rows are counted once, here: whatever deletes, moves or retries one adjusts the
 * counts itself in its transaction (maintenance/uncount.ts, uncountLive). The tables are locked
 * against writes while the counts are rebuilt: PostgreSQL and SQLite by the migration's own
 * transaction (and, on PostgreSQL, its DDL's locks), MariaDB (whose DDL commits on its own) by
 * LOCK TABLES around the rebuild.
 */

const FINISHED = "('done', 'failed', 'cancelled')";

/** The ended rows of both tables as one relation of (queue, tenant, status, finished_at). */
function ended(table: string, history: string): string {
  return `(SELECT queue, tenant, status, finished_at FROM ${table} WHERE status IN ${FINISHED}
           UNION ALL SELECT queue, tenant, status, finished_at FROM ${history}) AS ended`;
}

/** The legacy ended rows of the live table as a relation of (queue, tenant, status, finished_at). */
function legacy(table: string): string {
  return `(SELECT queue, tenant, status, finished_at FROM ${table} WHERE status IN ${FINISHED}) AS legacy`;
}

const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ table, named }) => {
    const history = named("jobs_history");
    /**
     * One count table's function, triggers and rebuild: `upsert` of `rows`. A TRUNCATE of
     * history leaves the legacy rows of the live table, and their counts.
     */
    const kept = (prefix: string, fn: string, target: string, upsert: (to: string, select: string) => string, rows: typeof countedRows) => [
      countingFunction(fn, target, (select) => upsert(target, select), rows, `DELETE FROM ${target}; ${upsert(target, rows(legacy(table), 1))};`),
      `CREATE OR REPLACE TRIGGER ${prefix}_insert AFTER INSERT ON ${history} REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      `CREATE OR REPLACE TRIGGER ${prefix}_delete AFTER DELETE ON ${history} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      `CREATE OR REPLACE TRIGGER ${prefix}_update AFTER UPDATE ON ${history} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      `CREATE OR REPLACE TRIGGER ${prefix}_truncate AFTER TRUNCATE ON ${history} FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      `DELETE FROM ${target}`,
      upsert(target, rows(ended(table, history), 1)),
    ];
    // The table locks are the DDL's own, held until migrate()'s transaction commits: DROP TRIGGER
    // locks the live table, CREATE TRIGGER the history table against writes (reads go on). No
    // LOCK TABLE: `forge-jobs init`'s SQL may be run by a tool outside a transaction block.
    return [
      ...["jobs_count", "jobs_minute"].flatMap((prefix) =>
        ["insert", "delete", "update", "truncate"].map((op) => `DROP TRIGGER IF EXISTS ${prefix}_${op} ON ${table}`),
      ),
      ...["jobs_count_finished", "jobs_count_inserted", "jobs_count_minutes", "jobs_count_minute_inserted"].map(
        (fn) => `DROP FUNCTION IF EXISTS ${named(fn)}()`,
      ),
      ...kept("jobs_count", named("jobs_history_count"), named("jobs_counts"), countsUpsert, countedRows),
      ...kept("jobs_minute", named("jobs_history_minutes"), named("jobs_minutes"), minutesUpsert, minuteRows),
    ];
  },
  // The whole migration is one BEGIN IMMEDIATE transaction (migrate.ts): no write in between.
  sqlite: (names) => {
    const history = names.named("jobs_history");
    const counts = names.named("jobs_counts");
    const minutes = names.named("jobs_minutes");
    const onHistory = { ...names, table: history };
    return [
      ...[...COUNT_TRIGGERS, ...MINUTE_TRIGGERS].map((name) => `DROP TRIGGER IF EXISTS ${names.index(name)}`),
      ...sqliteCountTriggers(onHistory, (row) => `(${row}.status = 'done' OR ${row}.status = 'failed' OR ${row}.status = 'cancelled')`),
      ...sqliteMinuteTriggers(onHistory),
      `DELETE FROM ${counts}`,
      sqliteCountsFrom(counts, ended(names.table, history), 1),
      `DELETE FROM ${minutes}`,
      sqliteMinutesFrom(minutes, ended(names.table, history), 1),
    ];
  },
  // Trigger names are the schema's: the live table's go before the history table's take them.
  // Writes between the two are miscounted, then the rebuild under LOCK TABLES counts everything
  // again; from UNLOCK on, only the history table's triggers count. migrate() unlocks on failure.
  mysql: ({ table, named }) => {
    const history = named("jobs_history");
    const counts = named("jobs_counts");
    const minutes = named("jobs_minutes");
    return [
      ...[...MYSQL_COUNT_TRIGGERS, ...MYSQL_MINUTE_TRIGGERS].map((name) => `DROP TRIGGER IF EXISTS ${named(name)}`),
      ...mysqlCountTriggers(history, counts, named),
      ...mysqlMinuteTriggers(history, minutes, named),
      `LOCK TABLES ${table} READ, ${history} READ, ${counts} WRITE, ${minutes} WRITE`,
      `DELETE FROM ${counts}`,
      mysqlCountsFrom(counts, ended(table, history), 1, "0"),
      `DELETE FROM ${minutes}`,
      mysqlMinutesFrom(minutes, ended(table, history), 1, "0"),
      "UNLOCK TABLES",
    ];
  },
};

/** Migration 15 for `dialect`. */
export function historyCounts(dialect: DialectName): Migration {
  return { version: 15, name: "counts_in_history", statements: statements[dialect] };
}
