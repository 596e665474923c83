import type { JobsDatabase } from "./db/database.js";
import type { DialectName } from "./db/executor.js";
import { toDate } from "./job-row.js";
import { parseJson } from "./payload.js";
import { forDialect, type PerDialect } from "./sql.js";

/** A job this worker holds: every write about it is fenced by `token`. */
export interface ClaimedJob {
  id: number;
  queue: string;
  task: string;
  payload: unknown;
  priority: number;
  /** This run's number, 1-based (attempts after the claim). */
  attempt: number;
  maxAttempts: number;
  progress: unknown;
  tenant: string | null;
  createdAt: Date;
  runAt: Date;
  token: string;
}

interface ClaimRow {
  id: number | string;
  queue: string;
  task: string;
  payload: unknown;
  priority: number;
  attempts: number;
  max_attempts: number;
  progress: unknown;
  tenant: string | null;
  created_at: unknown;
  run_at: unknown;
  claim_token: string;
}

export interface ClaimRequest {
  queues: readonly string[];
  limit: number;
  /** Seconds the lease lasts from the database's now. */
  lease: number;
  workerId: string;
}

const CLAIM: PerDialect<(db: JobsDatabase) => string> = {
  // SKIP LOCKED: concurrent claimers pass over each other's rows instead of waiting on them.
  postgres: (db) => `
    WITH picked AS (
      SELECT id FROM ${db.table}
      WHERE status = 'pending' AND queue = ANY($1::text[]) AND run_at <= now()
      ORDER BY priority DESC, id
      LIMIT $2
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${db.table} AS j
    SET status = 'running', attempts = j.attempts + 1, claim_token = gen_random_uuid(),
        locked_until = now() + make_interval(secs => $3), heartbeat_at = now(), locked_by = $4, updated_at = now()
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.task, j.payload, j.priority, j.attempts, j.max_attempts, j.progress, j.tenant,
              j.created_at, j.run_at, j.claim_token::text AS claim_token`,
};

export async function claimJobs(db: JobsDatabase, request: ClaimRequest): Promise<ClaimedJob[]> {
  if (request.limit <= 0 || request.queues.length === 0) return [];
  const { rows } = await db.executor.query<ClaimRow>(forDialect(CLAIM, db.dialect, "claim")(db), [
    request.queues,
    request.limit,
    request.lease,
    request.workerId,
  ]);
  return rows.map((row) => toClaimed(row, db.dialect)).sort((a, b) => b.priority - a.priority || a.id - b.id);
}

function toClaimed(row: ClaimRow, dialect: DialectName): ClaimedJob {
  return {
    id: Number(row.id),
    queue: row.queue,
    task: row.task,
    payload: parseJson(row.payload, dialect),
    priority: Number(row.priority),
    attempt: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    progress: parseJson(row.progress, dialect),
    tenant: row.tenant,
    createdAt: toDate(row.created_at),
    runAt: toDate(row.run_at),
    token: String(row.claim_token),
  };
}
