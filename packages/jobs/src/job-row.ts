import type { DialectName } from "./db/executor.js";
import { parseJson } from "./payload.js";
import type { Job, JobStatus } from "./types.js";

/** Named columns only: adding a column never changes what older code reads. */
export const JOB_COLUMNS =
  "id, queue, task, payload, status, priority, attempts, max_attempts, last_error, run_at, progress, result, tenant, " +
  "idempotency_key, dedup_key, created_at, updated_at, finished_at, locked_until, heartbeat_at, started_at";

export interface JobRow {
  id: number | string;
  queue: string;
  task: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  run_at: unknown;
  progress: unknown;
  result: unknown;
  tenant: string | null;
  idempotency_key: string | null;
  dedup_key: string | null;
  created_at: unknown;
  updated_at: unknown;
  finished_at: unknown;
  locked_until: unknown;
  heartbeat_at: unknown;
  started_at: unknown;
}

/** Database timestamps arrive as Date (pg, mysql2) or epoch milliseconds (SQLite). */
export function toDate(value: unknown): Date {
  if (value instanceof Date) return value;
  if (typeof value === "number" || typeof value === "bigint") return new Date(Number(value));
  if (typeof value === "string") return new Date(/^\d+(\.\d+)?$/.test(value) ? Number(value) : value);
  throw new TypeError(`not a timestamp: ${String(value)}`);
}

function toDateOrNull(value: unknown): Date | null {
  return value === null || value === undefined ? null : toDate(value);
}

export function toJob(row: JobRow, dialect: DialectName): Job {
  const base = {
    id: Number(row.id),
    queue: row.queue,
    task: row.task,
    payload: parseJson(row.payload, dialect),
    priority: Number(row.priority),
    attempts: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    lastError: row.last_error,
    runAt: toDate(row.run_at),
    progress: parseJson(row.progress, dialect),
    result: parseJson(row.result, dialect),
    tenant: row.tenant,
    idempotencyKey: row.idempotency_key,
    dedupKey: row.dedup_key,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    startedAt: toDateOrNull(row.started_at),
  };
  switch (row.status) {
    case "pending":
      return { ...base, status: "pending" };
    case "running":
      return { ...base, status: "running", lockedUntil: toDate(row.locked_until), heartbeatAt: toDate(row.heartbeat_at) };
    case "failed":
      return { ...base, status: "failed", finishedAt: toDateOrNull(row.finished_at) ?? base.updatedAt, lastError: row.last_error ?? "" };
    case "done":
    case "cancelled":
      return { ...base, status: row.status, finishedAt: toDateOrNull(row.finished_at) ?? base.updatedAt };
  }
}
