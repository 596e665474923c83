import { resolveDb } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { MYSQL_NOW, mysqlNowPlus } from "./db/mysql.js";
import { SQLITE_NOW, sqliteNowPlus } from "./db/sqlite.js";
import { forDialect, runSql, type PerDialect, type Script } from "./sql.js";
import { RECLAIM_OPTION_KEYS, checkOptions, type ReclaimOptions } from "./options.js";
import { checkName, checkSeconds } from "./validate.js";

export type { ReclaimOptions } from "./options.js";

export interface ReclaimedJob {
  id: number;
  queue: string;
  task: string;
  attempts: number;
  /**
   * pending: back in the queue (a job its worker held but never started keeps its attempts);
   * failed: it had no attempt left.
   */
  status: "pending" | "failed";
}

/** A lost worker gave no verdict, and the message must say so, unlike a handler's exception. */
export const WORKER_LOST_PREFIX = "worker lost without a verdict";

interface ReclaimedRow {
  id: number | string;
  queue: string;
  task: string;
  attempts: number;
  status: "pending" | "failed";
}

const RECLAIM: PerDialect<(db: JobsDatabase) => string | Script<ReclaimedRow>> = {
  // SKIP LOCKED: five reclaimers at once split the rows instead of reclaiming one twice; a
  // row locked by its worker's heartbeat is skipped and its fresh lease is honoured.
  postgres: (db) => `
    WITH lost AS (
      SELECT id FROM ${db.table}
      WHERE status = 'running'
        AND CASE WHEN $1::float8 IS NULL THEN locked_until < now()
                 ELSE heartbeat_at <= now() - make_interval(secs => $1::float8) END
        AND ($2::text IS NULL OR queue = $2::text)
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${db.table} AS j
    SET status = CASE WHEN j.started_at IS NULL OR j.attempts < j.max_attempts THEN 'pending' ELSE 'failed' END,
        last_error = CASE WHEN j.started_at IS NULL THEN j.last_error ELSE $3::text || ': attempt ' || j.attempts || ' of ' || j.max_attempts ||
          ' held by ' || COALESCE(j.locked_by, 'an unknown worker') || ' stopped sending heartbeats (last at ' ||
          to_char(j.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '); the handler never reported success or failure' END,
        finished_at = CASE WHEN j.started_at IS NULL OR j.attempts < j.max_attempts THEN NULL ELSE now() END,
        run_at = CASE WHEN j.started_at IS NULL THEN j.run_at WHEN j.attempts < j.max_attempts THEN now() ELSE j.run_at END,
        claim_token = NULL, locked_until = NULL, updated_at = now()
    FROM lost WHERE j.id = lost.id
    RETURNING j.id, j.queue, j.task, j.attempts, j.status`,
  // One statement under SQLite's single writer: nobody can heartbeat in between.
  sqlite: (db) => `
    UPDATE ${db.table}
    SET status = CASE WHEN started_at IS NULL OR attempts < max_attempts THEN 'pending' ELSE 'failed' END,
        last_error = CASE WHEN started_at IS NULL THEN last_error ELSE $3 || ': attempt ' || attempts || ' of ' || max_attempts ||
          ' held by ' || COALESCE(locked_by, 'an unknown worker') || ' stopped sending heartbeats (last at ' ||
          strftime('%Y-%m-%dT%H:%M:%fZ', heartbeat_at / 1000.0, 'unixepoch') || '); the handler never reported success or failure' END,
        finished_at = CASE WHEN started_at IS NULL OR attempts < max_attempts THEN NULL ELSE ${SQLITE_NOW} END,
        run_at = CASE WHEN started_at IS NULL THEN run_at WHEN attempts < max_attempts THEN ${SQLITE_NOW} ELSE run_at END,
        claim_token = NULL, locked_until = NULL, updated_at = ${SQLITE_NOW}
    WHERE status = 'running'
      AND CASE WHEN $1 IS NULL THEN locked_until < ${SQLITE_NOW} ELSE heartbeat_at <= ${sqliteNowPlus("$1", "-")} END
      AND ($2 IS NULL OR queue = $2)
    RETURNING id, queue, task, attempts, status`,
  // Lock the lost rows, update them, read them back. MariaDB assigns left to right: no SET
  // below reads a column an earlier one changed.
  // No SKIP LOCKED here (unlike the claim): with InnoDB, reclaimers scanning the same index
  // at once each skipped rows that another had only half-locked, and expired jobs were left
  // to nobody (bench/BENCHMARKS.md). A plain FOR UPDATE waits instead:
  // a row a heartbeat held is re-read once it commits, so its fresh lease is still honoured,
  // and a second reclaimer finds the first one's rows already pending. Deadlocks are retried.
  mysql: (db) => (executor, [lease, queue, prefix]) =>
    executor.transaction(async (tx) => {
      const lost = await tx.query<{ id: number | string }>(
        `SELECT id FROM ${db.table}
         WHERE status = 'running'
           AND CASE WHEN $1 IS NULL THEN locked_until < ${MYSQL_NOW} ELSE heartbeat_at <= ${mysqlNowPlus("$1", "-")} END
           AND ($2 IS NULL OR queue = $2)
         ORDER BY id
         FOR UPDATE`,
        [lease, queue],
      );
      if (lost.rows.length === 0) return { rows: [], rowCount: 0 };
      const ids = lost.rows.map((r) => r.id);
      await tx.query(
        `UPDATE ${db.table}
         SET status = CASE WHEN started_at IS NULL OR attempts < max_attempts THEN 'pending' ELSE 'failed' END,
             last_error = CASE WHEN started_at IS NULL THEN last_error ELSE CONCAT($2, ': attempt ', attempts, ' of ', max_attempts,
               ' held by ', COALESCE(locked_by, 'an unknown worker'), ' stopped sending heartbeats (last at ',
               DATE_FORMAT(heartbeat_at, '%Y-%m-%dT%H:%i:%s.'), LPAD(FLOOR(MICROSECOND(heartbeat_at) / 1000), 3, '0'),
               'Z); the handler never reported success or failure') END,
             finished_at = CASE WHEN started_at IS NULL OR attempts < max_attempts THEN NULL ELSE ${MYSQL_NOW} END,
             run_at = CASE WHEN started_at IS NULL THEN run_at WHEN attempts < max_attempts THEN ${MYSQL_NOW} ELSE run_at END,
             claim_token = NULL, locked_until = NULL, updated_at = ${MYSQL_NOW}
         WHERE id IN ($1)`,
        [ids, prefix],
      );
      return tx.query<ReclaimedRow>(`SELECT id, queue, task, attempts, status FROM ${db.table} WHERE id IN ($1)`, [ids]);
    }),
};

/**
 * `silentFor`: seconds without a heartbeat after which a running job is taken back, whatever
 * lease it holds (0 = every running job); null: only jobs whose own lease has expired.
 */
export async function reclaimJobs(db: JobsDatabase, silentFor: number | null, queue: string | null): Promise<ReclaimedJob[]> {
  const { rows } = await runSql<ReclaimedRow>(
    db.executor,
    forDialect(RECLAIM, db.dialect, "reclaim")(db),
    [silentFor, queue, WORKER_LOST_PREFIX],
  );
  return rows.map((r) => ({ id: Number(r.id), queue: r.queue, task: r.task, attempts: Number(r.attempts), status: r.status }));
}

/**
 * Takes back jobs whose worker is gone: pending again while attempts remain, otherwise failed
 * with a `last_error` that says the worker was lost without a verdict. The option is named
 * `lease` by the contract; it means "no heartbeat for this many seconds" (see ReclaimOptions).
 */
export async function reclaim(options: ReclaimOptions = {}): Promise<ReclaimedJob[]> {
  checkOptions(options, RECLAIM_OPTION_KEYS, "reclaim");
  const silentFor = options.lease === undefined ? null : checkSeconds(options.lease, "lease");
  const queue = options.queue === undefined ? null : checkName(options.queue, "queue");
  return reclaimJobs(resolveDb(options.db), silentFor, queue);
}
