import { claimJobs } from "../run/claim.js";
import { ServedGroups } from "../flow/served.js";
import { RunAbort, loseJob } from "../base/abort.js";
import { completeRuns } from "../run/complete.js";
import { resolveDb } from "../core/connect.js";
import { WorkerEmitter } from "../core/events.js";
import type { JobsDatabase } from "../core/database.js";
import { jobInfo, runHandler } from "../run/execute.js";
import { DEFAULT_LEASE_SECONDS, EXTENSIONS_PER_LEASE, extendLeases } from "../run/lease.js";
import { silentLogger } from "../base/logger.js";
import type { Handlers } from "../base/types.js";
import { DEFAULT_QUEUE, WORKER_DEFAULTS, checkLease, type DrainOptions, type ProcessOptions } from "../core/options.js";
import { DRAIN_OPTION_KEYS, PROCESS_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { checkInteger, checkName } from "../base/validate.js";
import { randomUUID } from "node:crypto";
import { settle, type RunDeps, type RunOutcome, type SettleWrites } from "../run/settle.js";
import { instrumentEmitter } from "../core/telemetry.js";
import { timerMs } from "../base/timers.js";
import { PausedQueues } from "./paused.js";

export type { DrainOptions, ProcessOptions } from "../core/options.js";

function depsFrom(options: ProcessOptions): { deps: RunDeps; queue: string; paused: PausedQueues } {
  const emitter = new WorkerEmitter(options.events);
  instrumentEmitter(emitter);
  const queue = options.queue === undefined ? DEFAULT_QUEUE : checkName(options.queue, "queue");
  const db = resolveDb(options.db, options.logger).forWorker();
  // Read before the first claim, then (a drain) once per a worker's default poll interval, as a worker would.
  const paused = new PausedQueues(db, [queue], WORKER_DEFAULTS.pollInterval * 1000, (error) => {
    throw error;
  });
  return {
    queue,
    paused,
    deps: { db, lease: options.lease === undefined ? DEFAULT_LEASE_SECONDS : checkLease(options.lease), emitter, logger: options.logger ?? silentLogger },
  };
}

/** processOne/drain write each outcome directly, once: the caller sees a failure. */
function directWrites(db: JobsDatabase): SettleWrites {
  return {
    complete: async (completion) => (await completeRuns(db, [completion])).has(completion.token),
    persist: (write) => write(),
  };
}

async function processNext(handlers: Handlers, deps: RunDeps, queue: string, paused: PausedQueues, workerId: string, served?: ServedGroups): Promise<boolean> {
  // Called from inside the application's own open transaction on a shared SQLite handle: a
  // claim would wait for that transaction to end, which waits for this call. Nothing to run.
  if (deps.db.executor.callerTransactionOpen?.()) return false;
  if (paused.due) await paused.refresh();
  if (paused.claimable.length === 0) return false;
  const {
    jobs: [job],
  } = await claimJobs(deps.db, { queues: [queue], limit: 1, lease: deps.lease, workerId, start: 1, served: served?.view, promote: "always" });
  if (!job) return false;
  served?.note(job.group);
  const info = jobInfo(job);
  deps.emitter.emit("job:claimed", { job: info, claimToken: job.token });
  const abort = new RunAbort();
  // Keep the lease alive while the handler runs, as the worker does for its jobs.
  const keepAlive = setInterval(
    () => {
      extendLeases(deps.db, [{ id: job.id, token: job.token }], deps.lease)
        .then((owned) => {
          if (owned.has(job.token)) return;
          deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "heartbeat" });
          loseJob(abort, info);
        })
        .catch((error: unknown) => deps.emitter.emit("worker:error", { workerId, error, during: "lease extension" }));
    },
    timerMs(Math.max(50, (deps.lease * 1000) / EXTENSIONS_PER_LEASE)),
  );
  const started = Date.now();
  deps.emitter.emit("job:started", { job: info, claimToken: job.token, waitMs: Math.max(0, started - job.runAt.getTime()) });
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
  checkOptions(options, PROCESS_OPTION_KEYS, "processOne");
  const { deps, queue, paused } = depsFrom(options);
  return processNext(handlers, deps, queue, paused, `processOne:${randomUUID()}`);
}

/** Runs ready jobs one after another until the queue has none ready; returns how many ran. */
export async function drain(handlers: Handlers, options: DrainOptions = {}): Promise<number> {
  checkOptions(options, DRAIN_OPTION_KEYS, "drain");
  const { deps, queue, paused } = depsFrom(options);
  const maxJobs = options.maxJobs === undefined ? Infinity : checkInteger(options.maxJobs, "maxJobs", 0, Number.MAX_SAFE_INTEGER);
  const workerId = `drain:${randomUUID()}`;
  // Turn-taking between groups across this drain's claims (one job each, so none counts running).
  const served = new ServedGroups();
  let count = 0;
  while (count < maxJobs && !options.signal?.aborted) {
    if (!(await processNext(handlers, deps, queue, paused, workerId, served))) break;
    count++;
  }
  return count;
}
