import type { JobsDatabase } from "../core/database.js";
import { columnList, decodeRow, toDate, type JobColumn } from "../core/job-row.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import { eachStore, storesOf } from "../core/stores.js";
import { FLOW, PLAIN } from "../flow/fair-sources.js";
import { JOB_STATUSES, type JobStatus } from "../base/types.js";
import { waitTimes, type WaitTimes } from "../flow/wait-times.js";
import { recentWaits } from "../flow/recent-starts.js";

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
  /** A running job's lease end: when the sweep takes it back if its worker is lost. */
  lockedUntil: Date | null;
  finishedAt: Date | null;
}

// Named columns, one status, newest first, a bounded LIMIT: the same text runs on
// PostgreSQL, SQLite and MariaDB (the executor rewrites `$1` for the latter two), except for
// the pending rows' three branches (see statusBranches).
const SUMMARY = [
  "id",
  "queue",
  "task",
  "status",
  "attempts",
  "max_attempts",
  "last_error",
  "payload",
  "progress",
  "run_at",
  "heartbeat_at",
  "locked_by",
  "locked_until",
  "finished_at",
] as const satisfies readonly JobColumn[];
export const MAX_LIST = 100;

/**
 * A status's rows as the predicates of the indexes that hold them, repeated word for word (the
 * planner picks a partial index only for a query that implies its predicate, SQLite only for
 * one that repeats its terms; the status is a literal for that). Pending rows are in three
 * partial indexes, jobs_claim_plain, jobs_scheduled and jobs_flow_claim, as in countsQuery; failed ones in
 * jobs_failed; MariaDB's indexes lead with status instead. A bare `status = $1 … ORDER BY id
 * DESC` walked the primary key backwards past every finished row until it had `limit` rows:
 * on a queue with no failure (or nothing pending), through every row of the table. Ended jobs
 * are read from history too (its (status, id) index), and from the live table, where a
 * database not yet upgraded keeps them.
 */
function statusBranches(db: JobsDatabase, status: JobStatus): { table: string; where: string }[] {
  if (!JOB_STATUSES.includes(status)) throw new TypeError(`latestJobs: no status ${JSON.stringify(status)}`);
  if (status === "pending" && db.dialect !== "mysql") {
    return [`status = 'pending' AND ${PLAIN} AND due`, `status = 'pending' AND ${PLAIN} AND NOT due`, `status = 'pending' AND ${FLOW}`].map((where) => ({
      table: db.table,
      where,
    }));
  }
  return storesOf(db, status).map((table) => ({ table, where: `status = '${status}'` }));
}

/** The newest `limit` jobs in `status` (ORDER BY id DESC), at most MAX_LIST; only `tenant`'s when given. */
export async function latestJobs(db: JobsDatabase, status: JobStatus, limit = 20, tenant: string | null = null): Promise<JobSummary[]> {
  const n = Math.min(MAX_LIST, Math.max(1, Math.trunc(limit)));
  const newest = ({ table, where }: { table: string; where: string }) =>
    `SELECT ${columnList(db.sql, SUMMARY)} FROM ${table} WHERE ${where}${tenant === null ? "" : " AND tenant = $1"} ORDER BY id DESC LIMIT ${n}`;
  const branches = statusBranches(db, status).map(newest);
  // Several branches: each newest first and stopped by its LIMIT, then merged.
  const sql =
    branches.length === 1 ? branches[0]! : `${branches.map((b, i) => `SELECT * FROM (${b}) AS b${i}`).join(" UNION ALL ")} ORDER BY id DESC LIMIT ${n}`;
  const { rows } = await db.executor.query(sql, tenant === null ? [] : [tenant]);
  return rows.map((raw) => {
    const row = decodeRow(db.sql, SUMMARY, raw);
    return {
      id: row.id,
      queue: row.queue,
      task: row.task,
      status: row.status,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
      lastError: row.last_error,
      payload: row.payload,
      progress: row.progress,
      runAt: row.run_at,
      heartbeatAt: row.heartbeat_at,
      lockedBy: row.locked_by,
      lockedUntil: row.locked_until,
      finishedAt: row.finished_at,
    };
  });
}

/** The chart's span: one slot per minute, the last one being the database clock's current minute. */
export const CHART_MINUTES = 60;
/** At most this many started jobs are read per page for the wait-time percentiles. */
export const WAIT_SAMPLE = 1000;

/** Jobs that ended done and failed in each of the last CHART_MINUTES minutes, oldest first. */
export interface Throughput {
  done: number[];
  failed: number[];
}

/** What the chart shows, per queue, read by the database clock. */
export interface RecentActivity {
  /** The database clock's current minute, in minutes since the epoch: the chart's last slot. */
  nowMinute: number;
  throughput: Map<string, Throughput>;
  waits: Map<string, WaitTimes>;
}

/**
 * Minutes since the epoch, by the database: of a timestamp column, of its clock now, and back
 * to a timestamp the column compares with (so the window's bound leaves the column bare and
 * its index usable). No session time zone takes part: MariaDB's UNIX_TIMESTAMP() would read
 * the UTC DATETIME columns in the session's zone, TIMESTAMPDIFF from the epoch does not.
 */
interface MinuteClock {
  minute(timestamp: string): string;
  start(minute: string): string;
}

const MYSQL_EPOCH = "TIMESTAMP'1970-01-01 00:00:00'";
const mysqlMinute = (timestamp: string) => `TIMESTAMPDIFF(MINUTE, ${MYSQL_EPOCH}, ${timestamp})`;
const pgMinute = (timestamp: string) => `floor(extract(epoch from ${timestamp}) / 60)::bigint`;
const sqliteMinute = (timestamp: string) => `(${timestamp} / 60000)`;

const CLOCK: PerDialect<MinuteClock> = {
  postgres: { minute: pgMinute, start: (m) => `to_timestamp((${m}) * 60)` },
  sqlite: { minute: sqliteMinute, start: (m) => `((${m}) * 60000)` },
  mysql: { minute: mysqlMinute, start: (m) => `(${MYSQL_EPOCH} + INTERVAL (${m}) MINUTE)` },
};

/** SQL: the database clock's current minute. */
function currentMinute(db: JobsDatabase, clock: MinuteClock): string {
  return clock.minute(db.sql.now);
}

/** SQL: the timestamp where the chart's first minute starts. */
function windowStart(db: JobsDatabase, clock: MinuteClock): string {
  return clock.start(`${currentMinute(db, clock)} - ${CHART_MINUTES - 1}`);
}

interface BucketRow {
  now_minute: number | string;
  queue: string | null;
  status: string | null;
  bucket: number | string | null;
  n: number | string | null;
}

/**
 * Per queue and minute, the jobs that ended done or failed in the last CHART_MINUTES minutes,
 * and the database's current minute (one row with it even when nothing ended): summed from
 * jobs_minutes (migration 10, kept by triggers), whose size does not grow with the jobs ended.
 */
async function throughput(db: JobsDatabase, clock: MinuteClock): Promise<{ nowMinute: number; throughput: Map<string, Throughput> }> {
  const { rows } = await db.executor.query<BucketRow>(
    `SELECT c.now_minute, t.queue, t.status, t.bucket, t.n
     FROM (SELECT ${currentMinute(db, clock)} AS now_minute) AS c
     LEFT JOIN (
       SELECT queue, status, minute AS bucket, SUM(n) AS n
       FROM ${db.minutesTable}
       WHERE minute > ${currentMinute(db, clock)} - ${CHART_MINUTES}
       GROUP BY queue, status, minute
     ) AS t ON 1 = 1`,
  );
  const nowMinute = Number(rows[0]!.now_minute);
  const byQueue = new Map<string, Throughput>();
  for (const row of rows) {
    if (row.queue === null || (row.status !== "done" && row.status !== "failed")) continue;
    // A row stamped after the clock was read (a later minute) has no slot yet.
    const slot = CHART_MINUTES - 1 - (nowMinute - Number(row.bucket));
    if (slot < 0 || slot >= CHART_MINUTES) continue;
    let series = byQueue.get(row.queue);
    if (!series) {
      series = { done: new Array<number>(CHART_MINUTES).fill(0), failed: new Array<number>(CHART_MINUTES).fill(0) };
      byQueue.set(row.queue, series);
    }
    series[row.status][slot]! += Number(row.n);
  }
  return { nowMinute, throughput: byQueue };
}

/**
 * The wait-time sample: of the last `sample` jobs to end in the chart's window and the last
 * `sample` to start among the running ones, `sample` shared fairly between queues (the latest
 * of each queue first, ORDER BY their rank). Bounded reads both (the newest rows of an index,
 * the running jobs), whatever the window's activity or the size of the table; a queue whose
 * jobs all ended before the latest `sample` of the others has no figure.
 */
async function waits(db: JobsDatabase, clock: MinuteClock, sample: number): Promise<Map<string, WaitTimes>> {
  const byQueue = await recentWaits(db.executor, db, "queue", windowStart(db, clock), { read: sample, limit: sample });
  return new Map([...byQueue].map(([queue, list]) => [queue, waitTimes(list)]));
}

/** Throughput per minute and wait-time percentiles per queue over the last CHART_MINUTES minutes. Read-only. */
export async function recentActivity(db: JobsDatabase, sample = WAIT_SAMPLE): Promise<RecentActivity> {
  const clock = forDialect(CLOCK, db.dialect, "dashboard chart");
  const counted = await throughput(db, clock);
  return { ...counted, waits: await waits(db, clock, Math.max(1, Math.trunc(sample))) };
}

/** What a job's page shows of a job it links to: one of its dependencies or dependents. */
export interface RelatedJob {
  task: string;
  status: JobStatus;
}

/**
 * Task and status of `ids` (a job's dependencies and dependents, as getJob lists them), live or
 * ended; only `tenant`'s when given. A job pruned since, or outside the tenant, is absent from the map.
 */
export async function relatedJobs(db: JobsDatabase, ids: readonly number[], tenant: string | null = null): Promise<Map<number, RelatedJob>> {
  const found = new Map<number, RelatedJob>();
  if (ids.length === 0) return found;
  const { rows } = await db.executor.query<{ id: number | string; task: string; status: JobStatus }>(
    eachStore((table) => `SELECT id, task, status FROM ${table} WHERE ${db.sql.inList("id", "$1")}${tenant === null ? "" : " AND tenant = $2"}`, storesOf(db)),
    tenant === null ? [[...ids]] : [[...ids], tenant],
  );
  for (const r of rows) found.set(Number(r.id), { task: r.task, status: r.status });
  return found;
}

/**
 * The running jobs among `ids` whose worker is in `lost`, with their lease's end (when the sweep
 * takes them back): what the job list shows instead of "running". Reads the live table by id.
 */
export async function lostWorkerJobs(db: JobsDatabase, ids: readonly number[], lost: ReadonlySet<string>): Promise<Map<number, Date | null>> {
  const found = new Map<number, Date | null>();
  if (ids.length === 0 || lost.size === 0) return found;
  const { rows } = await db.executor.query<{ id: number | string; locked_by: string | null; locked_until: unknown }>(
    `SELECT id, locked_by, locked_until FROM ${db.table} WHERE ${db.sql.inList("id", "$1")} AND status = 'running'`,
    [[...ids]],
  );
  for (const r of rows) if (r.locked_by !== null && lost.has(r.locked_by)) found.set(Number(r.id), r.locked_until == null ? null : toDate(r.locked_until));
  return found;
}
