import { resolveDb } from "../core/connect.js";
import { readSteps } from "./steps.js";
import { countsQuery, pendingRows, type CountRow } from "../maintenance/counts.js";
import { columnList, JOB_COLUMNS, toJob } from "../core/job-row.js";
import { readDependencyWait, withEdges } from "../dependencies/flow-reads.js";
import { readLiveProgress } from "../run/report-progress.js";
import { eachStore } from "../core/stores.js";
import type { Job, QueueStatus } from "../base/types.js";
import { DEFAULT_QUEUE, type QueueReadOptions, type ReadOptions } from "../core/options.js";
import { QUEUE_READ_OPTION_KEYS, READ_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { checkJobId, checkName, checkTenant } from "../base/validate.js";
import { readPausedQueues } from "../maintenance/pause.js";

export type { ReadOptions } from "../core/options.js";

/** Said in every read's error: what leaving the tenant out does. */
const EVERY_TENANT = "every tenant's jobs";

/**
 * One job by id, or null when it does not exist (or belongs to another tenant than `tenant`).
 * An id that cannot be a job's (NaN, 1.5, "3", 0, -1) is a JobError.
 */
export async function getJob(id: number, options: ReadOptions = {}): Promise<Job | null> {
  checkOptions(options, READ_OPTION_KEYS, "getJob");
  checkJobId(id);
  const tenant = checkTenant(options.tenant, "tenant", EVERY_TENANT);
  const db = resolveDb(options.db).forReading();
  const byId = (table: string) => `SELECT ${columnList(db.sql, JOB_COLUMNS)} FROM ${table} WHERE id = $1${tenant === null ? "" : " AND tenant = $2"}`;
  const params = tenant === null ? [id] : [id, tenant];
  // The live table first (a live job costs one probe); not there, history, and the live table
  // again in the same statement: a retry may have moved the job back since the first read.
  const row =
    (await db.executor.query(byId(db.table), params)).rows[0] ?? (await db.executor.query(eachStore(byId, [db.historyTable, db.table]), params)).rows[0];
  if (!row) return null;
  // on_dependency_failure is set exactly when the job was enqueued with dependencies.
  const flags = { dependsOn: row.on_dependency_failure != null, dependents: Boolean(Number(row.has_dependents)) };
  const job = await withEdges(db, db.executor, toJob(db.sql, row), flags);
  job.liveProgress = await readLiveProgress(db, job.id);
  ({ steps: job.steps, waitingFor: job.waitingFor } = await readSteps(db, job.id, job.status));
  if (job.waitingFor === null && job.status === "waiting" && flags.dependsOn) job.waitingFor = await readDependencyWait(db, job.id);
  return job;
}

/** Jobs waiting in a queue, delayed ones included (see `statusCounts` for the ready ones). */
export async function pendingCount(options: QueueReadOptions = {}): Promise<number> {
  checkOptions(options, QUEUE_READ_OPTION_KEYS, "pendingCount");
  const db = resolveDb(options.db).forReading();
  const queue = options.queue === undefined ? DEFAULT_QUEUE : checkName(options.queue, "queue");
  const tenant = checkTenant(options.tenant, "tenant", EVERY_TENANT);
  const { rows } = await db.executor.query<{ n: number | string }>(
    `SELECT count(*) AS n FROM (${pendingRows(db, ` AND queue = $1${tenant === null ? "" : " AND tenant = $2"}`)}) AS p`,
    tenant === null ? [queue] : [queue, tenant],
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * Per-queue counters, read in a read-only transaction: a diagnostic never changes what it
 * looks at. Pending and running are counted over the live rows; done, failed and cancelled
 * come from counts kept by triggers (see countsQuery), so the read costs the same with ten
 * million finished jobs in the table as with none. A paused queue (pauseQueue) is listed even
 * with no jobs, marked `paused`.
 */
export async function statusCounts(options: QueueReadOptions = {}): Promise<QueueStatus[]> {
  checkOptions(options, QUEUE_READ_OPTION_KEYS, "statusCounts");
  const db = resolveDb(options.db).forReading();
  const queue = options.queue === undefined ? null : checkName(options.queue, "queue");
  const tenant = checkTenant(options.tenant, "tenant", EVERY_TENANT);
  const { sql, params } = countsQuery(db, { queue, tenant });
  const rows = await db.executor.transaction(async (tx) => (await tx.query<CountRow>(sql, params)).rows, { readOnly: true });
  return summarise(rows, queue, await readPausedQueues(db));
}

function summarise(rows: CountRow[], queue: string | null, paused: ReadonlySet<string>): QueueStatus[] {
  const byQueue = new Map<string, QueueStatus>();
  const entry = (name: string): QueueStatus => {
    let status = byQueue.get(name);
    if (!status) {
      const counts = { pending: 0, running: 0, failed: 0, done: 0, cancelled: 0, waiting: 0 };
      status = { queue: name, counts, ready: 0, total: 0, oldestReadyAge: null, paused: paused.has(name) };
      byQueue.set(name, status);
    }
    return status;
  };
  if (queue !== null) entry(queue);
  else for (const name of paused) entry(name);
  for (const row of rows) {
    const status = entry(row.queue);
    const n = Number(row.n);
    status.counts[row.status] += n;
    status.total += n;
    status.ready += Number(row.ready);
    if (row.oldest_ready_age !== null && row.oldest_ready_age !== undefined) {
      status.oldestReadyAge = Math.max(0, Number(row.oldest_ready_age));
    }
  }
  return [...byQueue.values()].sort((a, b) => a.queue.localeCompare(b.queue));
}
