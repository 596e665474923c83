import type { JobsDatabase } from "../db/database.js";
import type { JobStatus } from "../types.js";

/** One row of a dashboard list: what the page shows, nothing more. */
export interface JobSummary {
  id: number;
  queue: string;
  task: string;
  status: JobStatus;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
  payload: unknown;
  progress: unknown;
  runAt: Date | null;
  heartbeatAt: Date | null;
  lockedBy: string | null;
  finishedAt: Date | null;
}

interface SummaryRow {
  id: number | string;
  queue: string;
  task: string;
  status: JobStatus;
  attempts: number | string;
  max_attempts: number | string;
  last_error: string | null;
  payload: unknown;
  progress: unknown;
  run_at: unknown;
  heartbeat_at: unknown;
  locked_by: string | null;
  finished_at: unknown;
}

// Named columns, one status, newest first, a bounded LIMIT: the same text runs on
// PostgreSQL, SQLite and MariaDB (the executor rewrites `$1` for the latter two).
const COLUMNS = "id, queue, task, status, attempts, max_attempts, last_error, payload, progress, run_at, heartbeat_at, locked_by, finished_at";
export const MAX_LIST = 100;

/** The newest `limit` jobs in `status` (ORDER BY id DESC), at most MAX_LIST. */
export async function latestJobs(db: JobsDatabase, status: JobStatus, limit = 20): Promise<JobSummary[]> {
  const n = Math.min(MAX_LIST, Math.max(1, Math.trunc(limit)));
  const { rows } = await db.executor.query<SummaryRow>(
    `SELECT ${COLUMNS} FROM ${db.table} WHERE status = $1 ORDER BY id DESC LIMIT ${n}`,
    [status],
  );
  return rows.map((row) => toSummary(row, db));
}

function toSummary(row: SummaryRow, db: JobsDatabase): JobSummary {
  return {
    id: Number(row.id),
    queue: row.queue,
    task: row.task,
    status: row.status,
    attempts: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    lastError: row.last_error,
    payload: jsonColumn(row.payload, db),
    progress: jsonColumn(row.progress, db),
    runAt: dateColumn(row.run_at),
    heartbeatAt: dateColumn(row.heartbeat_at),
    lockedBy: row.locked_by ?? null,
    finishedAt: dateColumn(row.finished_at),
  };
}

/** pg parses jsonb itself; SQLite and MariaDB hand back text. A display never throws on a bad value. */
function jsonColumn(value: unknown, db: JobsDatabase): unknown {
  if (value === null || value === undefined) return null;
  if (db.dialect === "postgres") return value;
  const text = Buffer.isBuffer(value) ? value.toString("utf8") : value;
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Timestamps arrive as Date (pg, mysql2) or epoch milliseconds (SQLite). */
function dateColumn(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value;
  const date = new Date(typeof value === "string" && !/^\d+(\.\d+)?$/.test(value) ? value : Number(value));
  return Number.isNaN(date.getTime()) ? null : date;
}
