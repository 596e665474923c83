import { retryDelaySeconds } from "./backoff.js";
import type { ClaimedJob } from "./claim.js";
import { saveCheckpoint } from "./checkpoint.js";
import type { JobsDatabase } from "./db/database.js";
import { errorMessage, isPermanent } from "./errors.js";
import type { WorkerEmitter } from "./events.js";
import { failJob } from "./fail.js";
import { extendLeases } from "./lease.js";
import type { Logger } from "./logger.js";
import { toJsonText } from "./payload.js";
import type { Handlers, JobContext, JobHandler, JobInfo } from "./types.js";
import { withExecutionSpan } from "./telemetry.js";

/** What one run of a handler came to, before anything is written. */
export type RunOutcome =
  | { kind: "succeeded"; result: string | null }
  | { kind: "threw"; error: unknown; permanent: boolean };

export interface RunDeps {
  db: JobsDatabase;
  lease: number;
  emitter: WorkerEmitter;
  logger: Logger;
}

/** Why a run's signal fired. */
export class JobAbortedError extends Error {
  constructor(readonly reason: "lease-lost" | "shutdown" | "cancelled", message: string) {
    super(message);
    this.name = "JobAbortedError";
  }
}

/**
 * A run's AbortController, made only when the handler reads `ctx.signal`. Most handlers never
 * do, and an AbortController with its signal was the largest single allocation per job (see
 * bench/BENCHMARKS.md). Aborted before anyone looked, the signal comes out aborted.
 */
export class RunAbort {
  private controller: AbortController | null = null;
  private why: JobAbortedError | null = null;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.why) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  /** Why the run was aborted, or null while it was not. */
  get reason(): JobAbortedError | null {
    return this.why;
  }

  abort(reason: JobAbortedError): void {
    if (this.why) return;
    this.why = reason;
    this.controller?.abort(reason);
  }
}

export function jobInfo(job: ClaimedJob): JobInfo {
  return { id: job.id, task: job.task, queue: job.queue, attempt: job.attempt, maxAttempts: job.maxAttempts, tenant: job.tenant, createdAt: job.createdAt };
}

export function loseJob(abort: RunAbort, info: JobInfo): void {
  if (!abort.reason) {
    abort.abort(new JobAbortedError("lease-lost", `job ${info.id} was taken over or cancelled; this run no longer owns it`));
  }
}

/** Runs the handler with its context. Never throws: a throw becomes an outcome. */
export async function runHandler(job: ClaimedJob, info: JobInfo, handlers: Handlers, deps: RunDeps, abort: RunAbort): Promise<RunOutcome> {
  const handler = Object.prototype.hasOwnProperty.call(handlers, job.task) ? (handlers[job.task] as unknown as JobHandler) : undefined;
  if (typeof handler !== "function") {
    const known = Object.keys(handlers).sort();
    const error = new Error(
      `no handler for task ${JSON.stringify(job.task)}; this worker handles ${known.length ? known.map((k) => JSON.stringify(k)).join(", ") : "no task at all"}`,
    );
    return { kind: "threw", error, permanent: true };
  }
  const ctx: JobContext = {
    job: info,
    claimToken: job.token,
    get signal() {
      return abort.signal;
    },
    progress: job.progress,
    heartbeat: async () => {
      const owned = (await extendLeases(deps.db, [{ id: job.id, token: job.token }], deps.lease)).has(job.token);
      if (!owned) {
        deps.emitter.emit("job:fenced", { job: info, write: "heartbeat" });
        loseJob(abort, info);
      }
      return owned;
    },
    checkpoint: async (progress, work) => {
      const saved = await saveCheckpoint(deps.db, job, deps.lease, progress, work as ((tx: unknown) => unknown) | undefined);
      if (saved) ctx.progress = progress;
      else {
        deps.emitter.emit("job:fenced", { job: info, write: "checkpoint" });
        loseJob(abort, info);
      }
      return saved;
    },
  };
  return withExecutionSpan(info, job.traceContext, () => invoke(handler, job, ctx), (o) => (o.kind === "threw" ? o.error : undefined));
}

async function invoke(handler: JobHandler, job: ClaimedJob, ctx: JobContext): Promise<RunOutcome> {
  try {
    const value = await handler(job.payload, ctx);
    try {
      return { kind: "succeeded", result: toJsonText(value, "result") };
    } catch (error) {
      // The work is done but its result cannot be stored; running it again would not help.
      return { kind: "threw", error: new Error(`the handler's result is not JSON: ${(error as Error).message}`), permanent: true };
    }
  } catch (error) {
    return { kind: "threw", error, permanent: isPermanent(error) };
  }
}

/** Writes a failed run: back to pending after the backoff while attempts remain, else failed. */
export async function recordFailure(job: ClaimedJob, info: JobInfo, outcome: Extract<RunOutcome, { kind: "threw" }>, deps: RunDeps, durationMs: number): Promise<void> {
  const willRetry = !outcome.permanent && job.attempt < job.maxAttempts;
  const delay = willRetry ? retryDelaySeconds(job.attempt) : null;
  const message = errorMessage(outcome.error);
  const written = await failJob(deps.db, job.id, job.token, delay === null ? { kind: "fail" } : { kind: "retry", delay }, message);
  if (!written) {
    deps.emitter.emit("job:fenced", { job: info, write: "fail" });
    return;
  }
  deps.emitter.emit("job:failed", { job: info, error: outcome.error, willRetry, retryInSeconds: delay, durationMs });
  deps.logger.warn(
    { jobId: job.id, task: job.task, queue: job.queue, attempt: job.attempt, maxAttempts: job.maxAttempts, durationMs, willRetry, retryInSeconds: delay, err: message },
    willRetry ? `job ${job.id} (${job.task}) failed, retrying in ${delay}s` : `job ${job.id} (${job.task}) failed`,
  );
  if (delay !== null) deps.emitter.emit("job:retried", { job: info, retryInSeconds: delay });
}
