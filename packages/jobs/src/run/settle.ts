import { retryDelaySeconds } from "../base/backoff.js";
import type { ClaimedJob } from "./claim.js";
import type { Completion } from "./complete.js";
import type { JobsDatabase } from "../core/database.js";
import { errorMessage } from "../base/errors.js";
import type { WorkerEmitter } from "../core/events.js";
import { failJob, readSnoozes, type FailureOutcome } from "./fail.js";
import { silentLogger, type Logger } from "../base/logger.js";
import { refusedForItsValues } from "../core/refusals.js";
import type { JobInfo } from "../base/types.js";
import { writeSleep, type SleepRequest } from "./sleep.js";

/** What one run of a handler came to, before anything is written. */
export type RunOutcome =
  | { kind: "succeeded"; result: string | null }
  /** `notSnoozed`: why an error that carried `snoozeSeconds` was not read as a snooze. */
  | { kind: "threw"; error: unknown; permanent: boolean; notSnoozed?: string }
  /** The handler asked to run again in `seconds` (`asked`: before MAX_SNOOZE_SECONDS shortened it). */
  | { kind: "snoozed"; error: unknown; seconds: number; asked: number }
  /** The handler called `ctx.sleep`: back to pending until its wake time, no attempt used. */
  | { kind: "slept"; sleep: SleepRequest };

/** What a run needs around it: the database, its lease, where its events and logs go, its progress pace. */
export interface RunDeps {
  db: JobsDatabase;
  lease: number;
  emitter: WorkerEmitter;
  logger: Logger;
  /** Milliseconds between a run's progress writes. Default `PROGRESS_WRITE_INTERVAL_MS`. */
  progressMs?: number;
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

/** One settle path for every runner: a run's outcome becomes done, retry, snoozed, failed or fenced, with its events and logs. */
export async function settle(job: ClaimedJob, info: JobInfo, outcome: RunOutcome, durationMs: number, deps: RunDeps, writes: SettleWrites): Promise<void> {
  if (outcome.kind === "succeeded") {
    const kept = await writes.complete({ id: job.id, token: job.token, result: outcome.result });
    if (!kept) {
      deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "complete" });
      return;
    }
    deps.emitter.emit("job:succeeded", { job: info, claimToken: job.token, durationMs });
    // Not even built for the default silent logger: one object and one string per job.
    if (deps.logger !== silentLogger)
      deps.logger.debug({ jobId: job.id, task: job.task, queue: job.queue, attempt: job.attempt, durationMs }, `job ${job.id} done`);
    return;
  }
  if (outcome.kind === "snoozed") {
    await writes.persist(() => recordSnooze(job, info, outcome, deps, durationMs), "recording a snooze");
    return;
  }
  if (outcome.kind === "slept") {
    const written = await writes.persist(() => writeSleep(deps.db, job, outcome.sleep), "recording a sleep");
    if (written) deps.emitter.emit("job:slept", { job: info, claimToken: job.token, step: outcome.sleep.name });
    else deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "sleep" });
    return;
  }
  await writes.persist(() => recordFailure(job, info, outcome, deps, durationMs), "recording a failure");
}

/**
 * Writes a snooze: back to pending after the delay, the attempt this run used given back.
 * Past the job's `max_snoozes` the job fails instead, so a handler that always snoozes ends.
 * The count read first is exact: only the claim token's holder changes `snoozes`, and the
 * write is fenced by that token.
 */
async function recordSnooze(
  job: ClaimedJob,
  info: JobInfo,
  outcome: Extract<RunOutcome, { kind: "snoozed" }>,
  deps: RunDeps,
  durationMs: number,
): Promise<void> {
  const count = await readSnoozes(deps.db, job.id, job.token);
  if (count === null) {
    deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "snooze" });
    return;
  }
  if (count.snoozes >= count.maxSnoozes) {
    await recordFailure(job, info, { kind: "threw", error: overSnoozed(count.snoozes, count.maxSnoozes, outcome), permanent: true }, deps, durationMs);
    return;
  }
  if (!(await failJob(deps.db, job.id, job.token, { kind: "snooze", delay: outcome.seconds }, null))) {
    deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "snooze" });
    return;
  }
  const snoozes = count.snoozes + 1;
  deps.emitter.emit("job:snoozed", { job: info, claimToken: job.token, snoozeSeconds: outcome.seconds, snoozes });
  if (deps.logger !== silentLogger) {
    const shortened = outcome.asked > outcome.seconds ? ` (asked ${outcome.asked}s, more than MAX_SNOOZE_SECONDS)` : "";
    deps.logger.info(
      {
        jobId: job.id,
        task: job.task,
        queue: job.queue,
        attempt: job.attempt,
        durationMs,
        snoozeSeconds: outcome.seconds,
        snoozes,
        reason: reasonOf(outcome.error),
      },
      `job ${job.id} (${job.task}) snoozed for ${outcome.seconds}s${shortened}, snooze ${snoozes} of at most ${count.maxSnoozes}`,
    );
  }
}

function firstLine(text: string): string {
  const end = text.indexOf("\n");
  return end === -1 ? text : text.slice(0, end);
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : errorMessage(error);
}

/** The failure a snooze past the cap becomes: the whole story in its message, no stack from inside the queue. */
function overSnoozed(snoozes: number, maxSnoozes: number, outcome: Extract<RunOutcome, { kind: "snoozed" }>): Error {
  const message =
    `job snoozed ${snoozes} times, its cap (maxSnoozes ${maxSnoozes}), and asked to snooze again for ${outcome.seconds}s (${reasonOf(outcome.error)}); ` +
    `failed instead of snoozing forever. If it legitimately waits this long, enqueue it with a higher maxSnoozes (enqueue(task, payload, { maxSnoozes }))`;
  const error = new Error(message);
  error.stack = `Error: ${message}`;
  return error;
}

/** Hands a held or unfinished job back at shutdown, without using an attempt. */
export async function handBack(job: ClaimedJob, info: JobInfo, deps: RunDeps, writes: SettleWrites): Promise<void> {
  const written = await writes.persist(() => failJob(deps.db, job.id, job.token, { kind: "release" }, null), "handing back a job");
  deps.emitter.emit(
    written ? "job:released" : "job:fenced",
    written ? { job: info, claimToken: job.token } : { job: info, claimToken: job.token, write: "release" },
  );
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
  const message = outcome.notSnoozed === undefined ? errorMessage(outcome.error) : `${outcome.notSnoozed}\n${errorMessage(outcome.error)}`;
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
    deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "fail" });
    return;
  }
  deps.emitter.emit("job:failed", { job: info, claimToken: job.token, error: outcome.error, willRetry, retryInSeconds: delay, durationMs });
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
      // One line per failed attempt: the error's name and message; its stack is in the job's
      // last error (getJob, forge-jobs show, the dashboard's job page), not repeated here.
      err: firstLine(reasonOf(outcome.error)),
      ...(outcome.notSnoozed === undefined ? {} : { notSnoozed: outcome.notSnoozed }),
    },
    willRetry ? `job ${job.id} (${job.task}) failed, retrying in ${delay}s` : `job ${job.id} (${job.task}) failed`,
  );
  if (delay !== null) deps.emitter.emit("job:retried", { job: info, claimToken: job.token, retryInSeconds: delay });
}
