import { createHash } from "node:crypto";
import { JobError } from "../base/errors.js";
import { checkName, describe } from "../base/validate.js";
import type { JobsDatabase } from "../core/database.js";
import type { InvokeOptions } from "../base/types.js";
import { checkKnownOptions } from "../base/validate.js";
import { enqueue } from "../enqueue/enqueue.js";
import { getJob } from "../reads/status.js";

/** The child's options a caller may give; the rest (tenant, keys, dependencies, db) the invocation sets itself. */
const INVOKE_OPTION_KEYS: Record<keyof InvokeOptions, true> = {
  queue: true,
  priority: true,
  maxAttempts: true,
  availableIn: true,
  group: true,
  concurrencyKey: true,
};

/** What a run ends to wait for: a child job (`ctx.invoke`). */
export interface ChildWait {
  kind: "child";
  childId: number;
}

/** How an invoked child ended, as its step saves it. */
export interface ChildAnswer {
  id: number;
  status: "done" | "failed" | "cancelled";
  result: unknown;
  error: string | null;
}

/** A child that did not end done: the parent's `ctx.invoke` throws this (not retried: the answer is saved). */
export class ChildJobError extends JobError {
  readonly retryable = false;

  constructor(
    readonly step: string,
    readonly child: ChildAnswer,
  ) {
    super(
      `ctx.invoke(${JSON.stringify(step)}): child job ${child.id} ${child.status === "failed" ? `failed: ${firstLine(child.error ?? "")}` : "was cancelled"}; catch this error to go on without its result`,
      "task",
    );
  }
}

/** The child's idempotency key: one child per (parent, step) for as long as the child is kept, whatever the name's length. */
function childKey(parentId: number, step: string): string {
  return `invoke:${parentId}:${createHash("sha256").update(step).digest("hex").slice(0, 40)}`;
}

/** Checks the task and options, refusing what the invocation sets itself; `fail` makes the handler's (not retried) error. */
export function checkInvoke(step: string, task: unknown, options: unknown, fail: (message: string, field: string) => JobError): InvokeOptions {
  const call = `ctx.invoke(${JSON.stringify(step)}, task, payload, options)`;
  try {
    checkName(task, "task");
  } catch (error) {
    throw fail(`${call}: ${(error as Error).message}`, "task");
  }
  if (options === undefined) return {};
  if (typeof options !== "object" || options === null) throw fail(`${call}: options must be an object of job options, got ${describe(options)}`, "options");
  try {
    checkKnownOptions(
      options,
      Object.keys(INVOKE_OPTION_KEYS),
      `${call} (the child's tenant is the parent's and it is enqueued once per step, so tenant and keys are not options)`,
    );
  } catch (error) {
    throw fail((error as JobError).message, (error as JobError).field ?? "options");
  }
  return options as InvokeOptions;
}

/** Enqueues the step's child once: a re-run of the parent gets the same child's id back (its idempotency key). */
export function enqueueChild(
  db: JobsDatabase,
  parent: { id: number; tenant: string | null },
  step: string,
  task: string,
  payload: unknown,
  options: InvokeOptions,
): Promise<number> {
  return enqueue(task as never, payload as never, {
    ...options,
    db,
    idempotencyKey: childKey(parent.id, step),
    ...(parent.tenant === null ? {} : { tenant: parent.tenant }),
  });
}

/** The child's answer once it ended (read over the live table and history), else null. */
export async function childAnswer(db: JobsDatabase, childId: number): Promise<ChildAnswer | null> {
  const child = await getJob(childId, { db });
  if (child === null) throw new JobError(`ctx.invoke: child job ${childId} is gone (pruned before its parent read it)`, "task");
  if (child.status !== "done" && child.status !== "failed" && child.status !== "cancelled") return null;
  return { id: childId, status: child.status, result: child.status === "done" ? (child.result ?? null) : null, error: child.lastError ?? null };
}

function firstLine(text: string): string {
  const end = text.indexOf("\n");
  return end === -1 ? text : text.slice(0, end);
}
