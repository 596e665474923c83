import { resolveDb } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { columnList, JOB_COLUMNS, toJob } from "./job-row.js";
import { forDialect, type PerDialect } from "./sql.js";
import type { Job, QueueStatus, StatusCountsByState } from "./types.js";
import { DEFAULT_QUEUE, QUEUE_READ_OPTION_KEYS, READ_OPTION_KEYS, checkOptions, type QueueReadOptions, type ReadOptions } from "./options.js";
import { checkJobId, checkName, checkTenant } from "./validate.js";

export type { ReadOptions } from "./options.js";

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
  const db = resolveDb(options.db);
  const { rows } = await db.executor.query(
    `SELECT ${columnList(db.sql, JOB_COLUMNS)} FROM ${db.table} WHERE id = $1${tenant === null ? "" : " AND tenant = $2"}`,
    tenant === null ? [id] : [id, tenant],
  );
  return rows[0] ? toJob(db.sql, rows[0]) : null;
}

/** Jobs waiting in a queue, delayed ones included (see `statusCounts` for the ready ones). */
export async function pendingCount(options: QueueReadOptions = {}): Promise<number> {
  checkOptions(options, QUEUE_READ_OPTION_KEYS, "pendingCount");
  const db = resolveDb(options.db);
  const queue = options.queue === undefined ? DEFAULT_QUEUE : checkName(options.queue, "queue");
  const tenant = checkTenant(options.tenant, "tenant", EVERY_TENANT);
  const { rows } = await db.executor.query<{ n: number | string }>(
    `SELECT count(*) AS n FROM ${db.table} WHERE status = 'pending' AND queue = $1${tenant === null ? "" : " AND tenant = $2"}`,
    tenant === null ? [queue] : [queue, tenant],
  );
  return Number(rows[0]?.n ?? 0);
}

interface CountRow {
  queue: string;
  status: keyof StatusCountsByState;
  n: number | string;
  ready: number | string;
  oldest_ready_age: number | string | null;
}

const COUNTS: PerDialect<(db: JobsDatabase, where: string) => string> = {
  postgres: (db, where) => `
    SELECT queue, status, count(*) AS n,
           count(*) FILTER (WHERE status = 'pending' AND run_at <= now()) AS ready,
           EXTRACT(EPOCH FROM now() - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now())) AS oldest_ready_age
    FROM ${db.table} ${where}
    GROUP BY queue, status`,
  // SQLite has FILTER (3.30+); ages are milliseconds there.
  sqlite: (db, where) => `
    SELECT queue, status, count(*) AS n,
           count(*) FILTER (WHERE status = 'pending' AND run_at <= ${db.sql.now}) AS ready,
           (${db.sql.now} - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= ${db.sql.now})) / 1000.0 AS oldest_ready_age
    FROM ${db.table} ${where}
    GROUP BY queue, status`,
  mysql: (db, where) => `
    SELECT queue, status, count(*) AS n,
           SUM(status = 'pending' AND run_at <= ${db.sql.now}) AS ready,
           TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN status = 'pending' AND run_at <= ${db.sql.now} THEN run_at END), ${db.sql.now}) / 1000000 AS oldest_ready_age
    FROM ${db.table} ${where}
    GROUP BY queue, status`,
};

/**
 * Per-queue counters, read in a read-only transaction: a diagnostic never changes what it
 * looks at.
 */
export async function statusCounts(options: QueueReadOptions = {}): Promise<QueueStatus[]> {
  checkOptions(options, QUEUE_READ_OPTION_KEYS, "statusCounts");
  const db = resolveDb(options.db);
  const queue = options.queue === undefined ? null : checkName(options.queue, "queue");
  const tenant = checkTenant(options.tenant, "tenant", EVERY_TENANT);
  const conditions: string[] = [];
  const params: unknown[] = [];
  if (queue !== null) conditions.push(`queue = $${params.push(queue)}`);
  if (tenant !== null) conditions.push(`tenant = $${params.push(tenant)}`);
  const where = conditions.length ? `WHERE ${conditions.join(" AND ")}` : "";
  const rows = await db.executor.transaction(
    async (tx) => (await tx.query<CountRow>(forDialect(COUNTS, db.dialect, "status counts")(db, where), params)).rows,
    { readOnly: true },
  );
  return summarise(rows, queue);
}

function summarise(rows: CountRow[], queue: string | null): QueueStatus[] {
  const byQueue = new Map<string, QueueStatus>();
  const entry = (name: string): QueueStatus => {
    let status = byQueue.get(name);
    if (!status) {
      status = { queue: name, counts: { pending: 0, running: 0, failed: 0, done: 0, cancelled: 0 }, ready: 0, total: 0, oldestReadyAge: null };
      byQueue.set(name, status);
    }
    return status;
  };
  if (queue !== null) entry(queue);
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
