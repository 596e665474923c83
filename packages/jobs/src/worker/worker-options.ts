import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { JobError } from "../base/errors.js";
import { silentLogger, type Logger } from "../base/logger.js";
import { WORKER_DEFAULTS, checkLease, type WorkerOptions } from "../core/options.js";
import { WORKER_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { checkInteger, checkName, checkSeconds } from "../base/validate.js";

export type { WorkerOptions } from "../core/options.js";

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
  progressMs: number;
  /** Whether this worker runs the scheduler. */
  schedules: boolean;
  db: JobsDatabase;
  logger: Logger;
}

function checkFlag(value: unknown, field: string, absent: boolean): boolean {
  if (value === undefined) return absent;
  if (typeof value !== "boolean") throw new JobError(`${field} must be true or false, got ${JSON.stringify(value)}`, field);
  return value;
}

export function workerSettings(options: WorkerOptions): WorkerSettings {
  checkOptions(options, WORKER_OPTION_KEYS, "runWorker");
  const queues = options.queue === undefined ? [WORKER_DEFAULTS.queue] : typeof options.queue === "string" ? [options.queue] : [...options.queue];
  if (queues.length === 0) throw new JobError("queue: give at least one queue name", "queue");
  const settings = {
    id: options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    queues: queues.map((q, i) => checkName(q, typeof options.queue === "string" ? "queue" : `queue[${i}]`)),
    concurrency: options.concurrency === undefined ? WORKER_DEFAULTS.concurrency : checkInteger(options.concurrency, "concurrency", 1, 10_000),
    prefetch: options.prefetch === undefined || options.prefetch === "auto" ? null : checkInteger(options.prefetch, "prefetch", 0, 10_000),
    lease: options.lease === undefined ? WORKER_DEFAULTS.lease : checkLease(options.lease),
    pollMs: (options.pollInterval === undefined ? WORKER_DEFAULTS.pollInterval : checkSeconds(options.pollInterval, "pollInterval", 0.001)) * 1000,
    graceMs: (options.gracePeriod === undefined ? WORKER_DEFAULTS.gracePeriod : checkSeconds(options.gracePeriod, "gracePeriod")) * 1000,
    sweepMs: (options.sweepInterval === undefined ? WORKER_DEFAULTS.sweepInterval : checkSeconds(options.sweepInterval, "sweepInterval")) * 1000,
    progressMs:
      (options.progressInterval === undefined ? WORKER_DEFAULTS.progressInterval : checkSeconds(options.progressInterval, "progressInterval", 0.01)) * 1000,
    logger: options.logger ?? silentLogger,
    schedules: checkFlag(options.schedules, "schedules", true),
  };
  // Last: without `db` this opens the default database, which a bad option must not do.
  const db = resolveDb(options.db, options.logger).forWorker();
  if (!db.executor.pooled) {
    throw new JobError("runWorker needs a pool or a database from connect(), not a single client: it runs several statements at once", "db");
  }
  return { ...settings, db };
}
