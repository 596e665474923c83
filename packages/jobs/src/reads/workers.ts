import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import type { DbLike } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { toDate } from "../core/job-row.js";
import { isMissingTable } from "../flow/flow-overview.js";

/** A worker as the operator's views show it: its registry row (migration 17) and the jobs it holds. */
export interface WorkerStatus {
  id: string;
  /** Null for a worker known only from the jobs it holds (no registry row: an older version, or its row was removed). */
  host: string | null;
  pid: number | null;
  queues: string[];
  concurrency: number | null;
  /** Seconds: the lease it claims with, after which a silent worker is lost. */
  lease: number | null;
  startedAt: Date | null;
  lastHeartbeatAt: Date | null;
  /** Running jobs whose `locked_by` names it. */
  jobsHeld: number;
  /** Its heartbeat is older than its lease (by the database clock): it stopped without leaving. */
  lost: boolean;
}

interface RegistryRow {
  id: string;
  host: string;
  pid: number | string;
  queues: string;
  concurrency: number | string;
  lease_seconds: number | string;
  started_at: unknown;
  heartbeat_at: unknown;
  lost: number | string | boolean;
}

/**
 * Every registered worker, and any worker named by a running job without a row, by id. The
 * jobs held are counted over the running jobs only (their partial index), grouped by
 * `locked_by`; nothing is read per worker. Read-only. An empty list on a schema before
 * migration 17 when no job runs.
 */
export async function readWorkers(db: JobsDatabase): Promise<WorkerStatus[]> {
  const workers = db.workersTable;
  let registered: RegistryRow[] = [];
  try {
    registered = (
      await db.executor.query<RegistryRow>(
        `SELECT id, host, pid, queues, concurrency, lease_seconds, started_at, heartbeat_at,
           CASE WHEN heartbeat_at < ${db.sql.nowPlus("lease_seconds", "-")} THEN 1 ELSE 0 END AS lost
         FROM ${workers}`,
      )
    ).rows;
  } catch (error) {
    if (!isMissingTable(error)) throw error;
  }
  const held = await db.executor.query<{ locked_by: string | null; n: number | string }>(
    `SELECT locked_by, COUNT(*) AS n FROM ${db.table} WHERE status = 'running' GROUP BY locked_by`,
  );
  const counts = new Map(held.rows.filter((r) => r.locked_by !== null).map((r) => [r.locked_by!, Number(r.n)]));
  const list: WorkerStatus[] = registered.map((row) => ({
    id: row.id,
    host: row.host,
    pid: Number(row.pid),
    queues: parseQueues(row.queues),
    concurrency: Number(row.concurrency),
    lease: Number(row.lease_seconds),
    startedAt: toDate(row.started_at),
    lastHeartbeatAt: toDate(row.heartbeat_at),
    jobsHeld: counts.get(row.id) ?? 0,
    lost: Number(row.lost) === 1 || row.lost === true,
  }));
  const known = new Set(list.map((w) => w.id));
  for (const [id, n] of counts) {
    if (!known.has(id)) {
      list.push({ id, host: null, pid: null, queues: [], concurrency: null, lease: null, startedAt: null, lastHeartbeatAt: null, jobsHeld: n, lost: false });
    }
  }
  return list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** What `listWorkers` takes. */
export interface ListWorkersOptions {
  db?: DbLike;
}

/**
 * The workers (see WorkerStatus): those registered (migration 17, written by `runWorker` at its
 * start, refreshed a few times per lease, removed on a clean stop), with the running jobs each
 * holds, a worker silent past its lease marked `lost`, and any worker named by a running job
 * without a row. Sorted by id. Read-only.
 */
export async function listWorkers(options: ListWorkersOptions = {}): Promise<WorkerStatus[]> {
  checkOptions(options, DATABASE_OPTION_KEYS, "listWorkers");
  return readWorkers(resolveDb(options.db).forReading());
}

function parseQueues(text: string): string[] {
  try {
    const value = JSON.parse(text) as unknown;
    return Array.isArray(value) ? value.map(String) : [];
  } catch {
    return [];
  }
}
