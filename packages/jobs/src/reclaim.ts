import { resolveDb, type DbLike } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { forDialect, type PerDialect } from "./sql.js";
import { checkKnownOptions, checkName, checkSeconds } from "./validate.js";

export interface ReclaimOptions {
  /**
   * Take back running jobs whose last heartbeat is older than this many seconds (0 = every
   * running job). Omitted: jobs whose own lease has expired.
   */
  lease?: number;
  /** Only this queue. */
  queue?: string;
  db?: DbLike;
}

export interface ReclaimedJob {
  id: number;
  queue: string;
  task: string;
  attempts: number;
  /** pending: back in the queue; failed: it had no attempt left. */
  status: "pending" | "failed";
}

/** The seed's rule: a lost worker gave no verdict, and the message must say so, unlike a handler's exception. */
export const WORKER_LOST_PREFIX = "worker lost without a verdict";

const RECLAIM: PerDialect<(db: JobsDatabase) => string> = {
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
    SET status = CASE WHEN j.attempts < j.max_attempts THEN 'pending' ELSE 'failed' END,
        last_error = $3::text || ': attempt ' || j.attempts || ' of ' || j.max_attempts ||
          ' held by ' || COALESCE(j.locked_by, 'an unknown worker') || ' stopped sending heartbeats (last at ' ||
          to_char(j.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '); the handler never reported success or failure',
        finished_at = CASE WHEN j.attempts < j.max_attempts THEN NULL ELSE now() END,
        run_at = CASE WHEN j.attempts < j.max_attempts THEN now() ELSE j.run_at END,
        claim_token = NULL, locked_until = NULL, updated_at = now()
    FROM lost WHERE j.id = lost.id
    RETURNING j.id, j.queue, j.task, j.attempts, j.status`,
};

export async function reclaimJobs(db: JobsDatabase, lease: number | null, queue: string | null): Promise<ReclaimedJob[]> {
  const { rows } = await db.executor.query<{ id: number | string; queue: string; task: string; attempts: number; status: "pending" | "failed" }>(
    forDialect(RECLAIM, db.dialect, "reclaim")(db),
    [lease, queue, WORKER_LOST_PREFIX],
  );
  return rows.map((r) => ({ id: Number(r.id), queue: r.queue, task: r.task, attempts: Number(r.attempts), status: r.status }));
}

/**
 * Takes back jobs whose worker is gone: pending again while attempts remain, otherwise failed
 * with a `last_error` that says the worker was lost without a verdict.
 */
export async function reclaim(options: ReclaimOptions = {}): Promise<ReclaimedJob[]> {
  checkKnownOptions(options, ["lease", "queue", "db"], "reclaim");
  const db = resolveDb(options.db);
  const lease = options.lease === undefined ? null : checkSeconds(options.lease, "lease");
  const queue = options.queue === undefined ? null : checkName(options.queue, "queue");
  return reclaimJobs(db, lease, queue);
}
