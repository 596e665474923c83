import { claimJobs } from "./claim.js";
import { RunAbort, loseJob } from "./abort.js";
import { completeRuns } from "./complete.js";
import { resolveDb, type DbLike } from "./connect.js";
import { WorkerEmitter, type WorkerEventHandlers } from "./events.js";
import type { JobsDatabase } from "./db/database.js";
import { jobInfo, runHandler } from "./execute.js";
import { DEFAULT_LEASE_SECONDS, EXTENSIONS_PER_LEASE, extendLeases } from "./lease.js";
import { silentLogger, type Logger } from "./logger.js";
import type { Handlers } from "./types.js";
import { checkInteger, checkKnownOptions, checkName, checkSeconds } from "./validate.js";
import { randomUUID } from "node:crypto";
import { settle, type RunDeps, type RunOutcome, type SettleWrites } from "./settle.js";
import { instrumentEmitter } from "./telemetry.js";
import { timerMs } from "./timers.js";

export interface ProcessOptions {
  queue?: string;
  db?: DbLike;
  /** Seconds; a job not finished by then may be reclaimed. Default 30. */
  lease?: number;
  events?: WorkerEventHandlers;
  logger?: Logger;
}

const PROCESS_KEYS = ["queue", "db", "lease", "events", "logger"];

function depsFrom(options: ProcessOptions): { deps: RunDeps; queue: string } {
  const emitter = new WorkerEmitter(options.events);
  instrumentEmitter(emitter);
  return {
    queue: options.queue === undefined ? "default" : checkName(options.queue, "queue"),
    deps: {
      db: resolveDb(options.db).forWorker(),
      lease: options.lease === undefined ? DEFAULT_LEASE_SECONDS : checkSeconds(options.lease, "lease", 0.001),
      emitter,
      logger: options.logger ?? silentLogger,
    },
  };
}

/** processOne/drain write each outcome directly, once: the caller sees a failure. */
function directWrites(db: JobsDatabase): SettleWrites {
  return {
    complete: async (completion) => (await completeRuns(db, [completion])).has(completion.token),
    persist: (write) => write(),
  };
}

async function processNext(handlers: Handlers, deps: RunDeps, queue: string, workerId: string): Promise<boolean> {
  // Called from inside the application's own open transaction on a shared SQLite handle: a
  // claim would wait for that transaction to end, which waits for this call. Nothing to run.
  if (deps.db.executor.callerTransactionOpen?.()) return false;
  const [job] = await claimJobs(deps.db, { queues: [queue], limit: 1, lease: deps.lease, workerId, start: 1 });
  if (!job) return false;
  const info = jobInfo(job);
  deps.emitter.emit("job:claimed", { job: info });
  const abort = new RunAbort();
  // Keep the lease alive while the handler runs, as the worker does for its jobs.
  const keepAlive = setInterval(() => {
    extendLeases(deps.db, [{ id: job.id, token: job.token }], deps.lease)
      .then((owned) => {
        if (owned.has(job.token)) return;
        deps.emitter.emit("job:fenced", { job: info, write: "heartbeat" });
        loseJob(abort, info);
      })
      .catch((error: unknown) => deps.emitter.emit("worker:error", { workerId, error, during: "lease extension" }));
  }, timerMs(Math.max(50, (deps.lease * 1000) / EXTENSIONS_PER_LEASE)));
  const started = Date.now();
  deps.emitter.emit("job:started", { job: info, waitMs: Math.max(0, started - job.runAt.getTime()) });
  let outcome: RunOutcome;
  try {
    outcome = await runHandler(job, info, handlers, deps, abort);
  } finally {
    clearInterval(keepAlive);
  }
  await settle(job, info, outcome, Date.now() - started, deps, directWrites(deps.db));
  return true;
}

/** Claims and runs one job of `queue`; false when none was ready. */
export async function processOne(handlers: Handlers, options: ProcessOptions = {}): Promise<boolean> {
  checkKnownOptions(options, PROCESS_KEYS, "processOne");
  const { deps, queue } = depsFrom(options);
  return processNext(handlers, deps, queue, `processOne:${randomUUID()}`);
}

export interface DrainOptions extends ProcessOptions {
  /** Stop after this many jobs. */
  maxJobs?: number;
  /** Stop (between jobs) once this fires. */
  signal?: AbortSignal;
}

/** Runs ready jobs one after another until the queue has none ready; returns how many ran. */
export async function drain(handlers: Handlers, options: DrainOptions = {}): Promise<number> {
  checkKnownOptions(options, [...PROCESS_KEYS, "maxJobs", "signal"], "drain");
  const { deps, queue } = depsFrom(options);
  const maxJobs = options.maxJobs === undefined ? Infinity : checkInteger(options.maxJobs, "maxJobs", 0, Number.MAX_SAFE_INTEGER);
  const workerId = `drain:${randomUUID()}`;
  let count = 0;
  while (count < maxJobs && !options.signal?.aborted) {
    if (!(await processNext(handlers, deps, queue, workerId))) break;
    count++;
  }
  return count;
}
