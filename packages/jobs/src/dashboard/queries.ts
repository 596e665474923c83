import type { JobsDatabase } from "../db/database.js";
import { toDate } from "../job-row.js";
import { parseJson } from "../payload.js";
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
    payload: parseJson(row.payload, db.dialect),
    progress: parseJson(row.progress, db.dialect),
    runAt: dateColumn(row.run_at),
    heartbeatAt: dateColumn(row.heartbeat_at),
    lockedBy: row.locked_by ?? null,
    finishedAt: dateColumn(row.finished_at),
  };
}

function dateColumn(value: unknown): Date | null {
  return value === null || value === undefined ? null : toDate(value);
}
