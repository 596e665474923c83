import type { ClaimedJob } from "./claim.js";
import { loseJob, type RunAbort } from "../base/abort.js";
import { saveCheckpoint } from "./checkpoint.js";
import { registerRun } from "./checkpoint-in.js";
import type { JobsDatabase } from "../core/database.js";
import { isPermanent } from "../base/errors.js";
import { extendLeases } from "./lease.js";
import { mayOverflowStatement, overStatementBudget } from "../core/packet.js";
import { toJsonText } from "../base/payload.js";
import { sealJson } from "../base/payload-codec.js";
import type { DependencyInfo, Handlers, JobContext, JobHandler, JobInfo, InvokeOptions, WaitForEventOptions } from "../base/types.js";
import type { RunDeps, RunOutcome } from "./settle.js";
import { maintenanceHandler } from "../maintenance/maintenance.js";
import { scheduledAtOf } from "../schedules/schedule-rows.js";
import { readBatchSummary, readDependencies } from "../dependencies/flow-reads.js";
import { isReturnedSnooze, snoozeRequest } from "./snooze.js";
import type { SleepRequest } from "./sleep.js";
import { withExecutionSpan } from "../core/telemetry.js";
import { StepRun } from "./steps.js";
import { ProgressReporter } from "./report-progress.js";

export function jobInfo(job: ClaimedJob): JobInfo {
  return { id: job.id, task: job.task, queue: job.queue, attempt: job.attempt, maxAttempts: job.maxAttempts, tenant: job.tenant, createdAt: job.createdAt };
}

/** Runs the handler with its context. Never throws: a throw becomes an outcome. */
export async function runHandler(job: ClaimedJob, info: JobInfo, handlers: Handlers, deps: RunDeps, abort: RunAbort): Promise<RunOutcome> {
  const handler = Object.prototype.hasOwnProperty.call(handlers, job.task)
    ? (handlers[job.task] as unknown as JobHandler)
    : maintenanceHandler(job.task, deps.db);
  if (typeof handler !== "function") {
    const known = Object.keys(handlers).sort();
    const error = new Error(
      `no handler for task ${JSON.stringify(job.task)}; this worker handles ${known.length ? known.map((k) => JSON.stringify(k)).join(", ") : "no task at all"}`,
    );
    return { kind: "threw", error, permanent: true };
  }
  // Made at the first step: a job that uses none reads and writes nothing more.
  let steps: StepRun | null = null;
  const stepRun = (): StepRun =>
    (steps ??= new StepRun({
      db: deps.db,
      job,
      lost: () => abort.reason !== null && abort.reason.reason !== "shutdown",
      fenced: (write) => {
        deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write });
        loseJob(abort, info);
      },
    }));
  // Made at the first report, like the steps: a job that reports nothing writes nothing more.
  let reporter: ProgressReporter | null = null;
  const ctx: JobContext = {
    job: info,
    claimToken: job.token,
    get signal() {
      return abort.signal;
    },
    progress: job.progress,
    scheduledAt: scheduledAtOf(job.idempotencyKey),
    heartbeat: async () => {
      const sentAt = new Date();
      const owned = (await extendLeases(deps.db, [{ id: job.id, token: job.token }], deps.lease)).has(job.token);
      if (owned) deps.emitter.emit("job:heartbeat", { job: info, claimToken: job.token, sentAt });
      else {
        deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "heartbeat" });
        loseJob(abort, info);
      }
      return owned;
    },
    checkpoint: async (progress, work) => {
      const outcome = await saveCheckpoint(deps.db, job, deps.lease, progress, work as ((tx: unknown) => unknown) | undefined);
      if (outcome.saved) ctx.progress = outcome.progress;
      else checkpointFenced();
      return outcome.saved;
    },
    // The results are the dependencies' stored JSON: their type is the caller's word (as a payload's).
    dependencies: <R>() => readDependencies(deps.db, job.id, job.tenant) as Promise<DependencyInfo<R>[]>,
    batch: () => readBatchSummary(deps.db, job.id, job.tenant),
    reportProgress: (value) => (reporter ??= new ProgressReporter(deps.db, job, () => progressFenced(), deps.progressMs)).report(value),
    step: (name, fn) => stepRun().step(name, fn),
    sleep: (name, seconds) => stepRun().sleep(name, seconds),
    sleepUntil: (name, date) => stepRun().sleepUntil(name, date),
    // The data is the sent event's stored JSON: its type is the caller's word (as a payload's).
    waitForEvent: <T>(name: string, options: WaitForEventOptions) => stepRun().waitForEvent(name, options) as Promise<T | null>,
    // The result is the child's stored JSON: its type is the caller's word.
    invoke: <R>(name: string, task: string, payload?: unknown, options?: InvokeOptions) => stepRun().invoke(name, task, payload, options) as Promise<R>,
  };
  function progressFenced(): void {
    deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "progress" });
    loseJob(abort, info);
  }
  function checkpointFenced(): void {
    deps.emitter.emit("job:fenced", { job: info, claimToken: job.token, write: "checkpoint" });
    loseJob(abort, info);
  }
  // checkpointIn (the same fenced write in the application's transaction) finds the run by its ctx.
  registerRun(ctx, { db: deps.db, job, lease: deps.lease, fenced: checkpointFenced });
  return withExecutionSpan(
    info,
    job.traceContext,
    // The last reported value lands before the verdict is written (a failed flush fails nothing).
    () => invoke(handler, job, ctx, deps.db, () => steps?.sleeping ?? null).finally(() => reporter?.flush().catch(() => false)),
    (o) => (o.kind === "threw" ? o.error : undefined),
  );
}

async function invoke(handler: JobHandler, job: ClaimedJob, ctx: JobContext, db: JobsDatabase, sleeping: () => SleepRequest | null): Promise<RunOutcome> {
  let value: unknown;
  try {
    if (job.unreadable) throw job.unreadable;
    value = await handler(job.payload, ctx);
  } catch (error) {
    // A sleep ends the run whatever the handler threw after it (or if it caught the sleep).
    const sleep = sleeping();
    return sleep ? { kind: "slept", sleep } : verdictOf(error);
  }
  const sleep = sleeping();
  if (sleep) return { kind: "slept", sleep };
  if (isReturnedSnooze(value)) return verdictOf(value);
  // The work is done but its result cannot be stored: running it again would not help, and a
  // completion the database refuses would only be written again and again.
  let result: string | null;
  try {
    result = toJsonText(value, "result", "replace");
  } catch (error) {
    return unstorable(`the handler's result is not JSON: ${(error as Error).message}`);
  }
  if (result === null) return { kind: "succeeded", result };
  const limit = db.settings.maxResultBytes;
  if (result.length * 3 > limit && Buffer.byteLength(result) > limit) {
    return unstorable(
      `result of ${Buffer.byteLength(result)} bytes is over the ${limit}-byte limit (maxResultBytes); store large results elsewhere and return a reference, or raise maxResultBytes in connect()`,
    );
  }
  result = sealJson(db.settings.payloadCodec, result);
  const over = mayOverflowStatement(db, result) ? await overStatementBudget(db, result).catch(() => null) : null; // unknown: the completion finds out
  if (over) {
    return unstorable(
      `result of ${over.bytes} bytes (quoted) does not fit in one statement under the MariaDB server's max_allowed_packet (${over.packet} bytes); raise max_allowed_packet on the server, or lower maxResultBytes`,
    );
  }
  return { kind: "succeeded", result };
}

/** What a thrown (or returned) error asks for: a snooze wins over `retryable`; else a failure. */
function verdictOf(error: unknown): RunOutcome {
  const request = snoozeRequest(error);
  if (request?.kind === "snooze") return { kind: "snoozed", error, seconds: request.seconds, asked: request.asked };
  const outcome: RunOutcome = { kind: "threw", error, permanent: isPermanent(error) };
  if (request?.kind === "invalid") outcome.notSnoozed = request.why;
  return outcome;
}

/** A permanent failure whose message is the whole story: no stack from inside the queue. */
function unstorable(message: string): RunOutcome {
  const error = new Error(message);
  error.stack = `Error: ${message}`;
  return { kind: "threw", error, permanent: true };
}
