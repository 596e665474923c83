import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { toDate } from "../core/job-row.js";
import { eachStore, storesOf } from "../core/stores.js";
import { READ_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import type { ReadOptions } from "../core/options.js";
import { checkJobId, checkTenant } from "../base/validate.js";
import type { JobStatus } from "../base/types.js";
import { isMissingTable } from "../flow/flow-overview.js";

/** One attempt of a job: when it started and ended, the worker that ran it, and the error that ended it. */
export interface JobAttempt {
  /** 1 for the first attempt. */
  attempt: number;
  startedAt: Date | null;
  /** Null while it runs (or when it was handed back unfinished). */
  endedAt: Date | null;
  /** The worker id (`locked_by`) that ran it. */
  worker: string | null;
  /** Why it ended, when it did not succeed; null for a success or an attempt still running. */
  error: string | null;
  /** True for the attempt read from the job's own row (the latest), false for an earlier one. */
  latest: boolean;
}

interface RowAttempt {
  status: JobStatus;
  attempts: number | string;
  started_at: unknown;
  finished_at: unknown;
  locked_by: string | null;
  last_error: string | null;
}

interface StoredAttempt {
  attempt: number | string;
  started_at: unknown;
  finished_at: unknown;
  worker: string | null;
  error: string | null;
}

const dateOrNull = (value: unknown): Date | null => (value === null || value === undefined ? null : toDate(value));

/**
 * A job's attempts, first to latest: the earlier ones from jobs_attempts (recorded only when an
 * attempt ended and the job ran again), the latest from the job's own row, unless the table
 * already holds it (a job waiting for its retry). A job that never started has none. Null when
 * the job does not exist (or is another tenant's). Read-only.
 */
export async function jobAttempts(db: JobsDatabase, id: number, tenant: string | null = null): Promise<JobAttempt[] | null> {
  const byId = (table: string) =>
    `SELECT status, attempts, started_at, finished_at, locked_by, last_error FROM ${table} WHERE id = $1${tenant === null ? "" : " AND tenant = $2"}`;
  const { rows } = await db.executor.query<RowAttempt>(eachStore(byId, storesOf(db)), tenant === null ? [id] : [id, tenant]);
  const row = rows[0];
  if (!row) return null;
  const stored = await db.executor
    .query<StoredAttempt>(`SELECT attempt, started_at, finished_at, worker, error FROM ${db.attemptsTable} WHERE job_id = $1 ORDER BY attempt, finished_at`, [
      id,
    ])
    // Before migration 17 no attempt was recorded apart: the job's own row tells the latest.
    .catch((error: unknown) => {
      if (isMissingTable(error)) return { rows: [] as StoredAttempt[] };
      throw error;
    });
  const attempts: JobAttempt[] = stored.rows.map((a) => ({
    attempt: Number(a.attempt),
    startedAt: dateOrNull(a.started_at),
    endedAt: dateOrNull(a.finished_at),
    worker: a.worker,
    error: a.error,
    latest: false,
  }));
  const latest = Number(row.attempts);
  if (latest > 0 && row.started_at !== null && !attempts.some((a) => a.attempt === latest)) {
    attempts.push({
      attempt: latest,
      startedAt: dateOrNull(row.started_at),
      endedAt: dateOrNull(row.finished_at),
      worker: row.locked_by,
      // A done or running job's last_error is an earlier attempt's, already listed.
      error: row.status === "done" || row.status === "running" ? null : row.last_error,
      latest: true,
    });
  }
  return attempts;
}

/**
 * One job's attempts (see JobAttempt), first to latest, or null when there is no such job (or
 * it is another tenant's). A job that succeeded at its first attempt has one, read from its
 * own row: attempts are recorded apart only when one ended and the job ran again. Read-only.
 */
export async function getJobAttempts(id: number, options: ReadOptions = {}): Promise<JobAttempt[] | null> {
  checkOptions(options, READ_OPTION_KEYS, "getJobAttempts");
  checkJobId(id);
  const tenant = checkTenant(options.tenant, "tenant", "every tenant's jobs");
  return jobAttempts(resolveDb(options.db).forReading(), id, tenant);
}
