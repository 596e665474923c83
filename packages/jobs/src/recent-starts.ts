import type { JobsDatabase } from "./db/database.js";
import { forDialect, type PerDialect } from "./sql.js";

/**
 * SQL: `(key, run_at, started_at)` of the `n` jobs that ended last (started since `since`) and
 * of the `n` running jobs that started last: where wait-time samples are read from (the
 * dashboard's queues, `listGroups`). Both reads are bounded, whatever the window's activity
 * or the size of the table: the ended ones backwards through jobs_finished, stopped by a LIMIT
 * (a job ends after it starts, so none older than `since` is missed for being read by
 * `finished_at`), the running ones among the running rows. `key` is the column to group by;
 * `and` narrows both (` AND group_key <> ''`), after the LIMIT of the ended ones' read, so
 * that it cannot make that read walk back through the hour. The ended ones' `started_at` is
 * compared after that LIMIT too: inside, PostgreSQL multiplied its selectivity with
 * finished_at's, expected fewer rows than the LIMIT, costed the read as the whole hour's range
 * and JIT-compiled it (bench/BENCHMARKS.md, "Ten million finished jobs").
 */
export function recentStarts(db: JobsDatabase, key: "queue" | "group_key", since: string, n: number, and = ""): string {
  const ended = forDialect(ENDED, db.dialect, "recent starts")(db, since, n);
  return `SELECT ${key} AS sample_key, run_at, started_at FROM (${ended}) AS ended WHERE started_at >= ${since}${and}
    UNION ALL
    SELECT * FROM (SELECT ${key} AS sample_key, run_at, started_at FROM ${db.table}
      WHERE status = 'running' AND started_at >= ${since}${and} ORDER BY started_at DESC LIMIT ${n}) AS running`;
}

/**
 * PostgreSQL and SQLite hold the ended rows in a partial index whose predicate the status list
 * repeats (each uses a partial index only for a query that implies or repeats it); MariaDB's
 * jobs_finished leads with status, which an IN list would read whole and sort: a branch per
 * status there, each stopped by its LIMIT.
 */
const ENDED: PerDialect<(db: JobsDatabase, since: string, n: number) => string> = {
  postgres: (db, since, n) => latestEnded(db, ["'done', 'failed', 'cancelled'"], since, n),
  sqlite: (db, since, n) => latestEnded(db, ["'done', 'failed', 'cancelled'"], since, n),
  mysql: (db, since, n) => latestEnded(db, ["'done'", "'failed'", "'cancelled'"], since, n),
};

function latestEnded(db: JobsDatabase, statusLists: string[], since: string, n: number): string {
  const branch = (list: string) =>
    `SELECT * FROM (SELECT queue, group_key, run_at, started_at, finished_at FROM ${db.table} WHERE status IN (${list}) AND finished_at >= ${since}
       ORDER BY finished_at DESC LIMIT ${n}) AS b`;
  if (statusLists.length === 1) return branch(statusLists[0]!);
  return `SELECT * FROM (${statusLists.map(branch).join(" UNION ALL ")}) AS u ORDER BY finished_at DESC LIMIT ${n}`;
}
