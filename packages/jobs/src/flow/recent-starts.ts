import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { toDate } from "../core/job-row.js";
import { forDialect, type PerDialect } from "../core/sql.js";

/** How much of recentStarts a wait sample reads and keeps. */
export interface WaitSample {
  /** Rows of each of recentStarts' two reads (ended, running). */
  read: number;
  /** At most this many per key (none: no cap besides `limit`). */
  perKey?: number;
  /** At most this many in all. */
  limit: number;
  /** Narrows both reads (recentStarts' `and`). */
  and?: string;
}

/**
 * Per value of `key`, the waits before start (`started_at - run_at`, in ms) of the jobs of
 * recentStarts, shared fairly between keys: the latest started of each key first (ORDER BY
 * their rank), so a quiet key keeps its figures next to a busy one. The dashboard's queues and
 * `listGroups` read their percentiles from it.
 */
export async function recentWaits(
  executor: Executor,
  db: JobsDatabase,
  key: "queue" | "group_key",
  since: string,
  sample: WaitSample,
): Promise<Map<string, number[]>> {
  const { rows } = await executor.query<{ sample_key: string; run_at: unknown; started_at: unknown }>(
    `SELECT sample_key, run_at, started_at FROM (
       SELECT sample_key, run_at, started_at, ROW_NUMBER() OVER (PARTITION BY sample_key ORDER BY started_at DESC) AS rank_in_key
       FROM (${recentStarts(db, key, since, sample.read, sample.and)}) AS recent
     ) AS ranked${
       sample.perKey === undefined
         ? ""
         : `
     WHERE rank_in_key <= ${sample.perKey}`
     }
     ORDER BY rank_in_key
     LIMIT ${sample.limit}`,
  );
  const byKey = new Map<string, number[]>();
  for (const row of rows) {
    const wait = Math.max(0, toDate(row.started_at).getTime() - toDate(row.run_at).getTime());
    const list = byKey.get(row.sample_key);
    if (list) list.push(wait);
    else byKey.set(row.sample_key, [wait]);
  }
  return byKey;
}

/**
 * SQL: `(key, run_at, started_at)` of the `n` jobs that ended last (started since `since`) and
 * of the `n` running jobs that started last: where wait-time samples are read from (the
 * dashboard's queues, `listGroups`). Both reads are bounded, whatever the window's activity
 * or the size of the table: the ended ones backwards through history's finished_at and, for a
 * database not yet upgraded, the live table's jobs_finished, each stopped by a LIMIT
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
 * PostgreSQL and SQLite hold the ended rows in a partial index whose predicate the status test
 * repeats (each uses a partial index only for a query that implies or repeats it); MariaDB's
 * jobs_finished leads with status, which an IN list would read whole and sort: a branch per
 * status there, each stopped by its LIMIT.
 */
const ENDED: PerDialect<(db: JobsDatabase, since: string, n: number) => string> = {
  postgres: (db, since, n) => latestEnded(db, ["status IN ('done', 'failed', 'cancelled')"], since, n),
  sqlite: (db, since, n) => latestEnded(db, [db.sql.finished()], since, n),
  mysql: (db, since, n) => latestEnded(db, ["status = 'done'", "status = 'failed'", "status = 'cancelled'"], since, n),
};

function latestEnded(db: JobsDatabase, statusTests: string[], since: string, n: number): string {
  const branch = (table: string, test: string) =>
    `SELECT * FROM (SELECT queue, group_key, run_at, started_at, finished_at FROM ${table} WHERE ${test}finished_at >= ${since}
       ORDER BY finished_at DESC LIMIT ${n}) AS b`;
  // History holds ended rows only: no status test, its finished_at index (and on PostgreSQL
  // the partitions of the window's days) read backwards.
  const branches = [...statusTests.map((test) => branch(db.table, `${test} AND `)), branch(db.historyTable, "")];
  return `SELECT * FROM (${branches.join(" UNION ALL ")}) AS u ORDER BY finished_at DESC LIMIT ${n}`;
}
