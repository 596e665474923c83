import type { JobsDatabase } from "../core/database.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import type { StatusCountsByState } from "../base/types.js";

/** One (queue, status) count as the counting query returns it. */
export interface CountRow {
  queue: string;
  status: keyof StatusCountsByState;
  n: number | string;
  ready: number | string;
  oldest_ready_age: number | string | null;
}

/** A queue and a tenant to narrow the counts to (null: all). */
export interface CountScope {
  queue: string | null;
  tenant: string | null;
}

/**
 * SQL parts per dialect. `live` reads each live status through the partial index whose
 * predicate it repeats word for word (the planner picks a partial index only for a query that
 * implies its predicate): the read is bounded by the pending and running rows, however many
 * finished rows the table holds. A new live status (say, jobs waiting on others) adds a branch
 * here over an index of its own.
 */
interface CountSql {
  /** Pending rows of a queue: SELECT queue, run_at … (a UNION ALL where partial indexes hold them: the plain due, the plain scheduled, the flow ones). */
  pending: (db: JobsDatabase, and: string) => string;
  /** `count(*) … AS ready, … AS oldest_ready_age` over a subquery `p` of (queue, run_at). */
  readiness: (db: JobsDatabase) => string;
}

const SQL: PerDialect<CountSql> = {
  postgres: {
    pending: (db, and) => `
      SELECT queue, run_at FROM ${db.table} WHERE status = 'pending' AND group_key = '' AND concurrency_key = '' AND due${and}
      UNION ALL
      SELECT queue, run_at FROM ${db.table} WHERE status = 'pending' AND group_key = '' AND concurrency_key = '' AND NOT due${and}
      UNION ALL
      SELECT queue, run_at FROM ${db.table} WHERE status = 'pending' AND (group_key <> '' OR concurrency_key <> '')${and}`,
    readiness: () => `count(*) FILTER (WHERE run_at <= now()) AS ready,
      EXTRACT(EPOCH FROM now() - min(run_at) FILTER (WHERE run_at <= now())) AS oldest_ready_age`,
  },
  // The same three partial indexes; ages are milliseconds here.
  sqlite: {
    pending: (db, and) => `
      SELECT queue, run_at FROM ${db.table} WHERE status = 'pending' AND group_key = '' AND concurrency_key = '' AND due${and}
      UNION ALL
      SELECT queue, run_at FROM ${db.table} WHERE status = 'pending' AND group_key = '' AND concurrency_key = '' AND NOT due${and}
      UNION ALL
      SELECT queue, run_at FROM ${db.table} WHERE status = 'pending' AND (group_key <> '' OR concurrency_key <> '')${and}`,
    readiness: (db) => `count(*) FILTER (WHERE run_at <= ${db.sql.now}) AS ready,
      (${db.sql.now} - min(run_at) FILTER (WHERE run_at <= ${db.sql.now})) / 1000.0 AS oldest_ready_age`,
  },
  // No partial indexes: jobs_flow_claim and jobs_running lead with status, which bounds the read the same way.
  mysql: {
    pending: (db, and) => `SELECT queue, run_at FROM ${db.table} WHERE status = 'pending'${and}`,
    readiness: (db) => `SUM(run_at <= ${db.sql.now}) AS ready,
      TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN run_at <= ${db.sql.now} THEN run_at END), ${db.sql.now}) / 1000000 AS oldest_ready_age`,
  },
};

/**
 * SQL: per value of `column` (a group or a concurrency key; '' left out), its running jobs and its
 * ready pending ones. A branch per status, so that each reads an index of its own (jobs_flow_claim
 * or jobs_key_pending, and jobs_running: each branch implies that partial index's predicate);
 * `status IN ('pending', 'running')` implies neither, and PostgreSQL read the whole table,
 * finished rows and all.
 */
export function liveCountsBy(db: JobsDatabase, column: "group_key" | "concurrency_key"): string {
  return `SELECT ${column}, SUM(running) AS running, SUM(ready) AS ready FROM (
       SELECT ${column}, 0 AS running, CASE WHEN run_at <= ${db.sql.now} THEN 1 ELSE 0 END AS ready
       FROM ${db.table} WHERE status = 'pending' AND ${column} <> ''
       UNION ALL
       SELECT ${column}, 1 AS running, 0 AS ready FROM ${db.table} WHERE status = 'running' AND ${column} <> ''
     ) AS live
     GROUP BY ${column}`;
}

/** SQL: the pending rows (queue, run_at) matching `and` (` AND queue = $1`…), read through the partial indexes. */
export function pendingRows(db: JobsDatabase, and: string): string {
  return forDialect(SQL, db.dialect, "pending rows").pending(db, and);
}

/**
 * The statement behind statusCounts: pending, running and waiting counted over the live rows (each through an index of its own), done,
 * failed and cancelled summed from jobs_counts (kept by triggers, migration 7). Never a count
 * over the whole table: its cost does not grow with the finished jobs kept.
 */
export function countsQuery(db: JobsDatabase, scope: CountScope): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  let and = "";
  if (scope.queue !== null) and += ` AND queue = $${params.push(scope.queue)}`;
  if (scope.tenant !== null) and += ` AND tenant = $${params.push(scope.tenant)}`;
  const sql = forDialect(SQL, db.dialect, "status counts");
  return {
    sql: `
      SELECT queue, 'pending' AS status, count(*) AS n, ${sql.readiness(db)}
      FROM (${sql.pending(db, and)}) AS p GROUP BY queue
      UNION ALL
      SELECT queue, 'running' AS status, count(*) AS n, 0 AS ready, NULL AS oldest_ready_age
      FROM ${db.table} WHERE status = 'running'${and} GROUP BY queue
      UNION ALL
      SELECT queue, 'waiting' AS status, count(*) AS n, 0 AS ready, NULL AS oldest_ready_age
      FROM ${db.table} WHERE status = 'waiting'${and} GROUP BY queue
      UNION ALL
      SELECT queue, status, SUM(n) AS n, 0 AS ready, NULL AS oldest_ready_age
      FROM ${db.countsTable} WHERE 1 = 1${and} GROUP BY queue, status`,
    params,
  };
}
