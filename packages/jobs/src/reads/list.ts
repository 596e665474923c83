import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import type { DbLike } from "../core/options.js";
import { JobError } from "../base/errors.js";
import { columnList, decodeRow, type JobColumn } from "../core/job-row.js";
import { firstOfEach, storesOf } from "../core/stores.js";
import { checkOptions } from "../core/option-keys.js";
import { JOB_STATUSES as STATUSES, type JobStatus } from "../base/types.js";
import { checkInteger, checkJobId, checkName, checkSeconds, checkTenant, describe } from "../base/validate.js";

/** The jobs `listJobs` returns: any of these filters, all of them applying. */
export interface ListJobsOptions {
  queue?: string;
  status?: JobStatus;
  task?: string;
  /** Only this tenant's jobs (the tenant rule of every read: an empty or non-string tenant is a JobError). */
  tenant?: string;
  /** Only jobs created at least this many seconds ago (by the database clock). */
  olderThan?: number;
  /** Page size, 1 to 500. Default 50. */
  limit?: number;
  /** The page after this one: the `next` cursor of the previous page (jobs with a smaller id). */
  before?: number;
  db?: DbLike;
}

/** One job of a list: what a table row shows (no payload or result: `getJob` reads those). */
export interface JobListItem {
  id: number;
  queue: string;
  task: string;
  status: JobStatus;
  priority: number;
  attempts: number;
  maxAttempts: number;
  tenant: string | null;
  group: string | null;
  concurrencyKey: string | null;
  lastError: string | null;
  runAt: Date;
  createdAt: Date;
  updatedAt: Date;
}

export interface JobList {
  /** Newest first (id descending). */
  jobs: JobListItem[];
  /** Pass as `before` for the next page; null on the last page. */
  next: number | null;
}

export const LIST_OPTION_KEYS = ["queue", "status", "task", "tenant", "olderThan", "limit", "before", "db"] as const;
const MAX_PAGE = 500;
const COLUMNS = [
  "id",
  "queue",
  "task",
  "status",
  "priority",
  "attempts",
  "max_attempts",
  "tenant",
  "group_key",
  "concurrency_key",
  "last_error",
  "run_at",
  "created_at",
  "updated_at",
] as const satisfies readonly JobColumn[];

/**
 * Jobs matching the filters, newest first, a page at a time (keyset paging by id: a page never
 * shifts when jobs are added meanwhile), live and ended ones alike. Read-only.
 */
export async function listJobs(options: ListJobsOptions = {}): Promise<JobList> {
  return listJobsWhere(options);
}

/**
 * More conditions for listJobsWhere, beside its filters: SQL over the job's columns, its values
 * bound through `bind` (which returns the placeholder), never written into the text.
 */
export type ListCondition = (bind: (value: unknown) => string, db: JobsDatabase) => string;

/** listJobs with `extra` conditions ANDed to the filters (the dashboard's search). */
export async function listJobsWhere(options: ListJobsOptions = {}, extra: readonly ListCondition[] = []): Promise<JobList> {
  checkOptions(options, LIST_OPTION_KEYS, "listJobs");
  const db = resolveDb(options.db).forReading();
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (condition: (p: string) => string, value: unknown) => where.push(condition(`$${params.push(value)}`));
  for (const condition of extra) where.push(`(${condition((value) => `$${params.push(value)}`, db)})`);
  if (options.queue !== undefined) add((p) => `queue = ${p}`, checkName(options.queue, "queue"));
  if (options.task !== undefined) add((p) => `task = ${p}`, checkName(options.task, "task"));
  if (options.status !== undefined) {
    if (!STATUSES.includes(options.status)) throw new JobError(`status must be one of ${STATUSES.join(", ")}, got ${describe(options.status)}`, "status");
    add((p) => `status = ${p}`, options.status);
  }
  const tenant = checkTenant(options.tenant, "tenant", "every tenant's jobs");
  if (tenant !== null) add((p) => `tenant = ${p}`, tenant);
  if (options.olderThan !== undefined) add((p) => `created_at <= ${db.sql.nowPlus(p, "-")}`, checkSeconds(options.olderThan, "olderThan"));
  if (options.before !== undefined) add((p) => `id < ${p}`, checkJobId(options.before, "before"));
  const limit = options.limit === undefined ? 50 : checkInteger(options.limit, "limit", 1, MAX_PAGE);
  // Both tables (a list of live statuses: the live one), each newest first through the index its
  // filters pick (history's (status, id) or (tenant, id), its id index else), merged by id.
  const select = (table: string) => `SELECT ${columnList(db.sql, COLUMNS)} FROM ${table}${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""}`;
  const { rows } = await db.executor.transaction((tx) => tx.query(firstOfEach(select, storesOf(db, options.status), "id DESC", limit + 1), params), {
    readOnly: true,
  });
  const jobs = rows.slice(0, limit).map((raw) => {
    const row = decodeRow(db.sql, COLUMNS, raw);
    return {
      id: row.id,
      queue: row.queue,
      task: row.task,
      status: row.status,
      priority: row.priority,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      tenant: row.tenant,
      group: row.group_key,
      concurrencyKey: row.concurrency_key,
      lastError: row.last_error,
      runAt: row.run_at,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  });
  return { jobs, next: rows.length > limit ? (jobs[jobs.length - 1]?.id ?? null) : null };
}
