import type { WorkerEventHandlers } from "./events.js";
import type { Logger } from "../base/logger.js";
import { checkSeconds } from "../base/validate.js";
import type { PayloadCodec } from "../base/payload-codec.js";
import type { JobDefaults } from "./job-options.js";
import type { DbLike } from "./db-like.js";

// Every public option: its type and its default, here and nowhere else; the keys each call
// accepts are in option-keys.ts beside it. The types of what a job carries are in
// job-options.ts, re-exported from here: import every option from this module.
export * from "./job-options.js";

export type { DbLike } from "./db-like.js";

export const DEFAULT_QUEUE = "default";
/** Snoozes a job may take before it fails (enqueue's `maxSnoozes`). */
export const DEFAULT_MAX_SNOOZES = 100;
/**
 * Total runs allowed, the first included, for a job enqueued without `maxAttempts` when the
 * database has no `jobDefaults`: one run, no retry (the contract's). With it, a job whose worker
 * was killed mid-run ends failed ("worker lost without a verdict").
 */
export const DEFAULT_MAX_ATTEMPTS = 1;
/** The largest `maxAttempts` accepted, at enqueue and in `jobDefaults`. */
export const MAX_MAX_ATTEMPTS = 1_000_000;
export const DEFAULT_PRIORITY = 0;
export const DEFAULT_AVAILABLE_IN = 0;
/** Default lease, in seconds: an orphaned job is back in work about this long after its worker died. */
export const DEFAULT_LEASE_SECONDS = 30;
/**
 * The shortest lease any entry point grants (worker, processOne, drain, heartbeat): a lease of
 * 0 would hand the job to the next claimer while its handler runs.
 */
export const MIN_LEASE_SECONDS = 0.001;
/** Where the queue lives when neither `db` nor `DATABASE_URL` says: an SQLite file in the working directory. */
export const DEFAULT_SQLITE_FILE = "forge-jobs.db";
/** Default cap on a serialized payload; large data belongs elsewhere, passed by reference. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;
/** Default cap on a handler's serialized result, for the same reason. */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;
/** The most jobs an automatic prefetch claims ahead of free slots. */
export const MAX_AUTO_PREFETCH = 500;

export const WORKER_DEFAULTS = {
  queue: DEFAULT_QUEUE,
  concurrency: 10,
  prefetch: "auto",
  pollInterval: 1,
  lease: DEFAULT_LEASE_SECONDS,
  gracePeriod: 10,
  sweepInterval: 5,
  progressInterval: 0.5,
} as const satisfies Partial<Record<keyof WorkerOptions, unknown>>;

export interface WorkerOptions {
  /** A queue name or a list of them. Default "default". */
  queue?: string | readonly string[];
  /** Handlers running at once. Default 10. */
  concurrency?: number;
  /**
   * Jobs claimed ahead of free slots, so a finished job's slot refills without a round trip.
   * Default "auto": as many as finish during two claim round trips (measured), at most 500 —
   * large batches for quick jobs, next to none for slow ones (no worker hoards long jobs).
   */
  prefetch?: number | "auto";
  /** Seconds between polls when no wake-up arrives (delayed jobs, backends without LISTEN). Default 1. */
  pollInterval?: number;
  /** Seconds a claim lasts; extended automatically while the job runs. Default 30. */
  lease?: number;
  /** Seconds in-flight jobs get to finish on shutdown before they are handed back. Default 10. */
  gracePeriod?: number;
  /** Seconds between this worker's sweeps for jobs of lost workers (0 = never). Default 5. */
  sweepInterval?: number;
  /**
   * Seconds between a run's writes of `ctx.reportProgress`, at least 0.01: a report sooner
   * than that after the last write is kept, and only the latest kept value is written when the
   * interval is over. Default 0.5.
   */
  progressInterval?: number;
  /** Stops the worker (gracefully) when it fires. */
  signal?: AbortSignal;
  db?: DbLike;
  events?: WorkerEventHandlers;
  logger?: Logger;
  /** Shown in `locked_by` and in reclaim messages. Default host:pid:random. */
  workerId?: string;
  /** Run the scheduler (enqueue the due runs of `schedule`s) every poll interval. Default true. */
  schedules?: boolean;
}

export interface ProcessOptions {
  queue?: string;
  db?: DbLike;
  /** Seconds; a job not finished by then may be reclaimed. Default 30. */
  lease?: number;
  events?: WorkerEventHandlers;
  logger?: Logger;
}

export interface DrainOptions extends ProcessOptions {
  /** Stop after this many jobs. */
  maxJobs?: number;
  /** Stop (between jobs) once this fires. */
  signal?: AbortSignal;
}

export interface ReadOptions {
  db?: DbLike;
  /**
   * Only this tenant's jobs: another tenant's job reads as "not found". Leave it out to read
   * every tenant's jobs; an empty or non-string tenant is a JobError, never "every tenant".
   */
  tenant?: string;
}

export interface QueueReadOptions extends ReadOptions {
  /** `pendingCount`: default "default"; `statusCounts`: default every queue. */
  queue?: string;
}

export interface AdminOptions {
  db?: DbLike;
  /**
   * Only act on this tenant's job (another tenant's reads as "not found": false). Leave it out
   * to act on any tenant's job; an empty or non-string tenant is a JobError.
   */
  tenant?: string;
}

export interface PruneOptions {
  /** Seconds since the job ended, at least (0: every ended job, one that ended this instant too). Required. */
  olderThan: number;
  /** Which ended states to delete. Default all three. */
  statuses?: ("done" | "failed" | "cancelled")[];
  /** Rows deleted per statement (each its own short transaction), 1 to 100,000. Default 1,000. */
  batchSize?: number;
  /**
   * `"history"`: move the ended jobs an older version left in the jobs table into history
   * instead of deleting them (what `forge-jobs upgrade` does). Omitted: ended jobs are deleted
   * from history and from the jobs table.
   */
  into?: "history";
  db?: DbLike;
}

export interface PruneHistoryOptions {
  /** Drop the days (partitions) that ended more than this many seconds ago. Required. */
  olderThan: number;
  db?: DbLike;
}

export interface ReclaimOptions {
  /**
   * Take back running jobs that sent no heartbeat for this many seconds, whatever lease they
   * hold (0 = every running job, as after a crash of every worker). Omitted: jobs whose own
   * lease has expired. The name is the contract's; it is a silence, not a lease granted.
   */
  lease?: number;
  /** Only this queue. */
  queue?: string;
  db?: DbLike;
}

export interface HeartbeatOptions {
  /** Seconds, at least 0.001; the lease the job holds is never shortened. Omitted: the lease the job holds. */
  lease?: number;
  db?: DbLike;
}

/** `migrate`, `schemaVersion` and `observeQueueDepth`: only a database. */
export interface DatabaseOptions {
  db?: DbLike;
}

export interface ConnectOptions {
  /** PostgreSQL schema (or MariaDB database) holding the jobs table. Default: the connection's own. */
  schema?: string;
  /** Largest serialized payload `enqueue` accepts, in bytes. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Largest serialized handler result stored, in bytes; a larger result fails its job. Default 1 MiB. */
  maxResultBytes?: number;
  /**
   * Encryption at rest: payloads, results and error messages are stored as `encode`'s text and
   * read back through `decode` (`aesGcmCodec({ keys, current })`). Default: stored as they are.
   */
  payloadCodec?: PayloadCodec;
  /** Connections in the pool (PostgreSQL, MariaDB). Default 10. */
  poolSize?: number;
  /**
   * PostgreSQL: `"transaction"` when the URL reaches the server through a pooler in transaction
   * mode (PgBouncer `pool_mode = transaction`, and poolers like it), where consecutive transactions
   * may run on different server connections: no named prepared statements, and no LISTEN through
   * it (wake-ups come from `listenUrl`, else workers poll). Default: `"transaction"` when the URL
   * has `pgbouncer=true` in its query string, else `"none"`.
   */
  pooler?: "none" | "transaction";
  /**
   * PostgreSQL: a URL straight to the server (not through a transaction pooler) for the one
   * LISTEN connection each worker holds for wake-ups. Default: the queue's own URL, or none
   * behind a transaction pooler (workers then poll every `pollInterval`, said once at start).
   */
  listenUrl?: string;
  /**
   * PostgreSQL: a read replica (a streaming replica, a hot standby) for the reads that only display: `getJob`, `listJobs`,
   * `pendingCount`, `statusCounts`, the dashboard's pages and `forge-jobs status`. They may lag
   * the primary by the replica's replication delay. Every write, and every read a worker or a
   * write depends on, stays on the primary. Default: none (everything on the URL).
   */
  readUrl?: string;
  /**
   * What a job enqueued through this database gets when its enqueue leaves an option out
   * (`enqueue`, `enqueueMany`, `enqueueBatch`, and the runs the scheduler of a worker on this
   * database enqueues). An option given at enqueue always wins. Default: none (1 attempt).
   */
  jobDefaults?: JobDefaults;
}

/** A lease to grant, in seconds: the one minimum for every entry point that takes a lease. */
export function checkLease(value: unknown, field = "lease"): number {
  return checkSeconds(value, field, MIN_LEASE_SECONDS);
}
