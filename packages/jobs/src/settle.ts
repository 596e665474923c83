import { retryDelaySeconds } from "./backoff.js";
import type { ClaimedJob } from "./claim.js";
import type { Completion } from "./complete.js";
import type { JobsDatabase } from "./db/database.js";
import { errorMessage } from "./errors.js";
import type { WorkerEmitter } from "./events.js";
import { failJob, type FailureOutcome } from "./fail.js";
import { silentLogger, type Logger } from "./logger.js";
import { refusedForItsValues } from "./refusals.js";
import type { JobInfo } from "./types.js";

/** What one run of a handler came to, before anything is written. */
export type RunOutcome = { kind: "succeeded"; result: string | null } | { kind: "threw"; error: unknown; permanent: boolean };

/** What a run needs around it: the database, its lease, and where its events and logs go. */
export interface RunDeps {
  db: JobsDatabase;
  lease: number;
  emitter: WorkerEmitter;
  logger: Logger;
}

/**
 * How the caller writes: the worker batches completions and rides out an outage on failure
 * writes; processOne/drain write each one directly, once.
 */
export interface SettleWrites {
  /** Marks the run done; true when its token still owned the job. */
  complete(completion: Completion): Promise<boolean>;
  /** Runs a failure or hand-back write under the caller's retry policy. */
  persist<T>(write: () => Promise<T>, during: string): Promise<T>;
}

/** One settle path for every runner: a run's outcome becomes done, retry, failed or fenced, with its events and logs. */
export async function settle(job: ClaimedJob, info: JobInfo, outcome: RunOutcome, durationMs: number, deps: RunDeps, writes: SettleWrites): Promise<void> {
  if (outcome.kind === "succeeded") {
    const kept = await writes.complete({ id: job.id, token: job.token, result: outcome.result });
    if (!kept) {
      deps.emitter.emit("job:fenced", { job: info, write: "complete" });
      return;
    }
    deps.emitter.emit("job:succeeded", { job: info, durationMs });
    // Not even built for the default silent logger: one object and one string per job.
    if (deps.logger !== silentLogger)
      deps.logger.debug({ jobId: job.id, task: job.task, queue: job.queue, attempt: job.attempt, durationMs }, `job ${job.id} done`);
    return;
  }
  await writes.persist(() => recordFailure(job, info, outcome, deps, durationMs), "recording a failure");
}

/** Hands a held or unfinished job back at shutdown, without using an attempt. */
export async function handBack(job: ClaimedJob, info: JobInfo, deps: RunDeps, writes: SettleWrites): Promise<void> {
  const written = await writes.persist(() => failJob(deps.db, job.id, job.token, { kind: "release" }, null), "handing back a job");
  deps.emitter.emit(written ? "job:released" : "job:fenced", written ? { job: info } : { job: info, write: "release" });
}

/** Writes a failed run: back to pending after the backoff while attempts remain, else failed. */
async function recordFailure(
  job: ClaimedJob,
  info: JobInfo,
  outcome: Extract<RunOutcome, { kind: "threw" }>,
  deps: RunDeps,
  durationMs: number,
): Promise<void> {
  const willRetry = !outcome.permanent && job.attempt < job.maxAttempts;
  const delay = willRetry ? retryDelaySeconds(job.attempt) : null;
  const message = errorMessage(outcome.error);
  const verdict: FailureOutcome = delay === null ? { kind: "fail" } : { kind: "retry", delay };
  let written: boolean;
  try {
    written = await failJob(deps.db, job.id, job.token, verdict, message);
  } catch (error) {
    if (!refusedForItsValues(deps.db.dialect, error)) throw error;
    // Written again, it would be refused again, and the job end "worker lost": record the
    // verdict with the database's reason instead (the error itself goes to the log below).
    written = await failJob(deps.db, job.id, job.token, verdict, `the database refused to store this job's error: ${(error as Error).message}`);
  }
  if (!written) {
    deps.emitter.emit("job:fenced", { job: info, write: "fail" });
    return;
  }
  deps.emitter.emit("job:failed", { job: info, error: outcome.error, willRetry, retryInSeconds: delay, durationMs });
  deps.logger.warn(
    {
      jobId: job.id,
      task: job.task,
      queue: job.queue,
      attempt: job.attempt,
      maxAttempts: job.maxAttempts,
      durationMs,
      willRetry,
      retryInSeconds: delay,
      err: message,
    },
    willRetry ? `job ${job.id} (${job.task}) failed, retrying in ${delay}s` : `job ${job.id} (${job.task}) failed`,
  );
  if (delay !== null) deps.emitter.emit("job:retried", { job: info, retryInSeconds: delay });
}
