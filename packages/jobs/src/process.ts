import { claimJobs } from "./claim.js";
import { completeJobs } from "./complete.js";
import { resolveDb, type DbLike } from "./connect.js";
import { WorkerEmitter, type WorkerEventHandlers } from "./events.js";
import { RunAbort, jobInfo, loseJob, recordFailure, runHandler, type RunDeps, type RunOutcome } from "./execute.js";
import { DEFAULT_LEASE_SECONDS, extendLeases } from "./lease.js";
import { silentLogger, type Logger } from "./logger.js";
import type { Handlers } from "./types.js";
import { checkInteger, checkKnownOptions, checkName, checkSeconds } from "./validate.js";
import { randomUUID } from "node:crypto";
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
        if (!owned.has(job.token)) loseJob(abort, info);
      })
      .catch((error: unknown) => deps.emitter.emit("worker:error", { workerId, error, during: "lease extension" }));
  }, timerMs(Math.max(50, (deps.lease * 1000) / 3)));
  const started = Date.now();
  deps.emitter.emit("job:started", { job: info, waitMs: Math.max(0, started - job.runAt.getTime()) });
  let outcome: RunOutcome;
  try {
    outcome = await runHandler(job, info, handlers, deps, abort);
  } finally {
    clearInterval(keepAlive);
  }
  const durationMs = Date.now() - started;
  if (outcome.kind === "succeeded") {
    const kept = await completeJobs(deps.db, [{ id: job.id, token: job.token, result: outcome.result }]);
    if (kept.has(job.id)) {
      deps.emitter.emit("job:succeeded", { job: info, durationMs });
      deps.logger.debug({ jobId: job.id, task: job.task, queue: job.queue, attempt: job.attempt, durationMs }, `job ${job.id} done`);
    } else deps.emitter.emit("job:fenced", { job: info, write: "complete" });
  } else {
    await recordFailure(job, info, outcome, deps, durationMs);
  }
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
