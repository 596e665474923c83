import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { resolveDb, type DbLike } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { JobError } from "./errors.js";
import type { WorkerEventHandlers } from "./events.js";
import { DEFAULT_LEASE_SECONDS } from "./lease.js";
import { silentLogger, type Logger } from "./logger.js";
import { checkInteger, checkKnownOptions, checkName, checkSeconds } from "./validate.js";

export interface WorkerOptions {
  /** A queue name or a list of them. Default "default". */
  queue?: string | readonly string[];
  /** Handlers running at once. Default 10. */
  concurrency?: number;
  /**
   * Jobs claimed ahead of free slots, so a finished job's slot refills without a claim.
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
  /** Stops the worker (gracefully) when it fires. */
  signal?: AbortSignal;
  db?: DbLike;
  events?: WorkerEventHandlers;
  logger?: Logger;
  /** Shown in `locked_by` and in reclaim messages. Default host:pid:random. */
  workerId?: string;
}

/** Every key of WorkerOptions: a key added to the interface and not here fails to compile. */
const WORKER_KEYS = Object.keys({
  queue: true,
  concurrency: true,
  prefetch: true,
  pollInterval: true,
  lease: true,
  gracePeriod: true,
  sweepInterval: true,
  signal: true,
  db: true,
  events: true,
  logger: true,
  workerId: true,
} satisfies Record<keyof WorkerOptions, true>);

/** WorkerOptions checked once, with their defaults, in the units the worker uses. */
export interface WorkerSettings {
  id: string;
  queues: readonly string[];
  concurrency: number;
  /** A fixed prefetch, or null for "auto". */
  prefetch: number | null;
  lease: number;
  pollMs: number;
  graceMs: number;
  sweepMs: number;
  db: JobsDatabase;
  logger: Logger;
}

export function workerSettings(options: WorkerOptions): WorkerSettings {
  checkKnownOptions(options, WORKER_KEYS, "runWorker");
  const queues = options.queue === undefined ? ["default"] : typeof options.queue === "string" ? [options.queue] : [...options.queue];
  if (queues.length === 0) throw new JobError("queue: give at least one queue name", "queue");
  const settings = {
    id: options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    queues: queues.map((q, i) => checkName(q, typeof options.queue === "string" ? "queue" : `queue[${i}]`)),
    concurrency: options.concurrency === undefined ? 10 : checkInteger(options.concurrency, "concurrency", 1, 10_000),
    prefetch: options.prefetch === undefined || options.prefetch === "auto" ? null : checkInteger(options.prefetch, "prefetch", 0, 10_000),
    lease: options.lease === undefined ? DEFAULT_LEASE_SECONDS : checkSeconds(options.lease, "lease", 0.001),
    pollMs: (options.pollInterval === undefined ? 1 : checkSeconds(options.pollInterval, "pollInterval", 0.001)) * 1000,
    graceMs: (options.gracePeriod === undefined ? 10 : checkSeconds(options.gracePeriod, "gracePeriod")) * 1000,
    sweepMs: (options.sweepInterval === undefined ? 5 : checkSeconds(options.sweepInterval, "sweepInterval")) * 1000,
    logger: options.logger ?? silentLogger,
  };
  // Last: without `db` this opens the default database, which a bad option must not do.
  const db = resolveDb(options.db).forWorker();
  if (!db.executor.pooled) {
    throw new JobError("runWorker needs a pool or a database from connect(), not a single client: it runs several statements at once", "db");
  }
  return { ...settings, db };
}
