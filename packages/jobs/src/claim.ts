import type { JobsDatabase } from "./db/database.js";
import type { DialectName } from "./db/executor.js";
import { randomUUID } from "node:crypto";
import { MYSQL_NOW, mysqlNowPlus } from "./db/mysql.js";
import { SQLITE_NOW, SQLITE_UUID, sqliteNowPlus } from "./db/sqlite.js";
import { toDate } from "./job-row.js";
import { parseJson } from "./payload.js";
import { forDialect, runSql, type PerDialect, type Script } from "./sql.js";

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
  /** The enqueuing span's context (OpenTelemetry), linked from the execution span. */
  traceContext?: unknown;
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
  trace_context: unknown;
}

export interface ClaimRequest {
  queues: readonly string[];
  limit: number;
  /** Seconds the lease lasts from the database's now. */
  lease: number;
  workerId: string;
}

const CLAIMED_COLUMNS = "id, queue, task, payload, priority, attempts, max_attempts, progress, tenant, created_at, run_at, claim_token, trace_context";

const CLAIM: PerDialect<(db: JobsDatabase) => string | Script<ClaimRow>> = {
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
    SET status = 'running', attempts = j.attempts + 1, claim_token = gen_random_uuid(), started_at = now(),
        locked_until = now() + make_interval(secs => $3), heartbeat_at = now(), locked_by = $4, updated_at = now()
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.task, j.payload, j.priority, j.attempts, j.max_attempts, j.progress, j.tenant,
              j.created_at, j.run_at, j.claim_token::text AS claim_token, j.trace_context`,
  // SQLite has a single writer: BEGIN IMMEDIATE takes the write lock before the claim reads,
  // so two claimers never pick the same rows (nor meet SQLITE_BUSY half-way). $1 is JSON.
  sqlite: (db) => (executor, params) =>
    executor.transaction((tx) =>
      tx.query<ClaimRow>(
        `UPDATE ${db.table}
         SET status = 'running', attempts = attempts + 1, claim_token = ${SQLITE_UUID}, started_at = ${SQLITE_NOW},
             locked_until = ${sqliteNowPlus("$3")}, heartbeat_at = ${SQLITE_NOW}, locked_by = $4, updated_at = ${SQLITE_NOW}
         WHERE id IN (
           SELECT id FROM ${db.table}
           WHERE status = 'pending' AND queue IN (SELECT value FROM json_each($1)) AND run_at <= ${SQLITE_NOW}
           ORDER BY priority DESC, id
           LIMIT $2)
         RETURNING ${CLAIMED_COLUMNS}`,
        params,
      ),
    ),
  // MariaDB has SKIP LOCKED but no UPDATE … RETURNING: lock the rows, update them with a
  // token each (made here; ELT(FIELD(id, ids…), tokens…) picks a row's own), read them back,
  // in one transaction. neg_priority = -priority: the index walks priority DESC, id forwards.
  mysql: (db) => (executor, [queues, limit, lease, workerId]) =>
    executor.transaction(async (tx) => {
      const picked = await tx.query<{ id: number | string }>(
        `SELECT id FROM ${db.table}
         WHERE status = 'pending' AND queue IN ($1) AND run_at <= ${MYSQL_NOW}
         ORDER BY neg_priority, id
         LIMIT $2
         FOR UPDATE SKIP LOCKED`,
        [queues, limit],
      );
      if (picked.rows.length === 0) return { rows: [], rowCount: 0 };
      const ids = picked.rows.map((r) => Number(r.id));
      await tx.query(
        `UPDATE ${db.table}
         SET status = 'running', attempts = attempts + 1, claim_token = ELT(FIELD(id, $1), $2), started_at = ${MYSQL_NOW},
             locked_until = ${mysqlNowPlus("$3")}, heartbeat_at = ${MYSQL_NOW}, locked_by = $4, updated_at = ${MYSQL_NOW}
         WHERE id IN ($1)`,
        [ids, ids.map(() => randomUUID()), lease, workerId],
      );
      return tx.query<ClaimRow>(`SELECT ${CLAIMED_COLUMNS} FROM ${db.table} WHERE id IN ($1)`, [ids]);
    }),
};

export async function claimJobs(db: JobsDatabase, request: ClaimRequest): Promise<ClaimedJob[]> {
  if (request.limit <= 0 || request.queues.length === 0) return [];
  const { rows } = await runSql<ClaimRow>(db.executor, forDialect(CLAIM, db.dialect, "claim")(db), [
    request.queues,
    request.limit,
    request.lease,
    request.workerId,
  ], "claim");
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
    traceContext: parseJson(row.trace_context, dialect),
  };
}
