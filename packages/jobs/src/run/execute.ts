import type { ClaimedJob } from "./claim.js";
import type { JobsDatabase } from "../core/database.js";
import { isPermanent } from "../base/errors.js";
import { mayOverflowStatement, overStatementBudget } from "../core/packet.js";
import { toJsonText } from "../base/payload.js";
import { sealJson } from "../base/payload-codec.js";
import type { Handlers, JobHandler, JobInfo } from "../base/types.js";
import type { RunAbort } from "../base/abort.js";
import { RunContext } from "./context.js";
import type { RunDeps, RunOutcome } from "./settle.js";
import { maintenanceHandler } from "../maintenance/maintenance.js";
import { isReturnedSnooze, snoozeRequest } from "./snooze.js";
import { withExecutionSpan } from "../core/telemetry.js";

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
  const ctx = new RunContext(job, info, deps, abort);
  return withExecutionSpan(
    info,
    job.traceContext,
    // The last reported value lands before the verdict is written (a failed flush fails nothing).
    () => invoke(handler, job, ctx, deps.db),
    (o) => (o.kind === "threw" ? o.error : undefined),
  );
}

async function invoke(handler: JobHandler, job: ClaimedJob, ctx: RunContext, db: JobsDatabase): Promise<RunOutcome> {
  try {
    return await outcomeOf(handler, job, ctx, db);
  } finally {
    const flushing = ctx.flushProgress();
    if (flushing) await flushing;
  }
}

async function outcomeOf(handler: JobHandler, job: ClaimedJob, ctx: RunContext, db: JobsDatabase): Promise<RunOutcome> {
  let value: unknown;
  try {
    if (job.unreadable) throw job.unreadable;
    value = await handler(job.payload, ctx);
  } catch (error) {
    // A sleep ends the run whatever the handler threw after it (or if it caught the sleep).
    const sleep = ctx.sleeping();
    return sleep ? { kind: "slept", sleep } : verdictOf(error);
  }
  const sleep = ctx.sleeping();
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
