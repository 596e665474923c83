import type { ClaimedJob } from "./claim.js";
import { loseJob, type RunAbort } from "../base/abort.js";
import { saveCheckpoint } from "./checkpoint.js";
import { extendLeases } from "./lease.js";
import type { JobsDatabase } from "../core/database.js";
import type { BatchSummary, DependencyInfo, JobContext, JobInfo, InvokeOptions, WaitForEventOptions } from "../base/types.js";
import type { RunDeps } from "./settle.js";
import { scheduledAtOf } from "../schedules/schedule-rows.js";
import { readBatchSummary, readDependencies } from "../dependencies/flow-reads.js";
import type { SleepRequest } from "./sleep.js";
import { StepRun } from "./steps.js";
import { ProgressReporter } from "./report-progress.js";

/** What a checkpoint written in the application's transaction needs of a run (checkpoint-in.ts). */
export interface RunScope {
  db: JobsDatabase;
  job: { id: number; token: string };
  lease: number;
  /** Tells the worker (event, signal) that the run lost its job. */
  fenced(): void;
}

type Methods = Pick<
  JobContext,
  "heartbeat" | "checkpoint" | "reportProgress" | "dependencies" | "batch" | "step" | "sleep" | "sleepUntil" | "waitForEvent" | "invoke"
>;

/**
 * The `ctx` a handler gets: one object per run. Its methods are made on first use and kept (a
 * handler may take them apart, `{ step, sleep }`, and call them alone, or replace one on its
 * ctx, as a wrapper that records steps does), so a run that uses none allocates none: a context
 * of a dozen closures made for every job was the largest allocation of a no-op job's run. The
 * run's internals are private fields: logging `ctx` shows the job, not the database and its
 * settings.
 */
export class RunContext implements JobContext {
  readonly job: JobInfo;
  readonly claimToken: string;
  progress: unknown;
  readonly scheduledAt: Date | null;
  readonly #run: ClaimedJob;
  readonly #deps: RunDeps;
  readonly #abort: RunAbort;
  #methods: Partial<Methods> | null = null;
  /** Made at the first step: a job that uses none reads and writes nothing more. */
  #steps: StepRun | null = null;
  /** Made at the first report, like the steps. */
  #reporter: ProgressReporter | null = null;

  constructor(job: ClaimedJob, info: JobInfo, deps: RunDeps, abort: RunAbort) {
    this.job = info;
    this.claimToken = job.token;
    this.progress = job.progress;
    this.scheduledAt = scheduledAtOf(job.idempotencyKey);
    this.#run = job;
    this.#deps = deps;
    this.#abort = abort;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The sleep a step asked for in this run, if any: the run ends slept, whatever the handler did after. */
  sleeping(): SleepRequest | null {
    return this.#steps?.sleeping ?? null;
  }

  /** Writes the last reported progress before the verdict (a failed flush fails nothing); nothing to await when none was reported. */
  flushProgress(): Promise<unknown> | undefined {
    return this.#reporter?.flush().catch(() => false);
  }

  /** What checkpointIn needs of the run behind `ctx`, or null for an object no worker made. */
  static scopeOf(ctx: unknown): RunScope | null {
    if (!(ctx instanceof RunContext)) return null;
    const run = ctx.#run;
    return { db: ctx.#deps.db, job: { id: run.id, token: run.token }, lease: ctx.#deps.lease, fenced: () => ctx.#lost("checkpoint") };
  }

  get heartbeat(): Methods["heartbeat"] {
    return this.#method("heartbeat", () => () => this.#heartbeat());
  }
  set heartbeat(fn: Methods["heartbeat"]) {
    (this.#methods ??= {}).heartbeat = fn;
  }
  get checkpoint(): Methods["checkpoint"] {
    return this.#method("checkpoint", () => (progress, work) => this.#checkpoint(progress, work as ((tx: unknown) => unknown) | undefined));
  }
  set checkpoint(fn: Methods["checkpoint"]) {
    (this.#methods ??= {}).checkpoint = fn;
  }
  get reportProgress(): Methods["reportProgress"] {
    return this.#method(
      "reportProgress",
      () => (value) => (this.#reporter ??= new ProgressReporter(this.#deps.db, this.#run, () => this.#lost("progress"), this.#deps.progressMs)).report(value),
    );
  }
  set reportProgress(fn: Methods["reportProgress"]) {
    (this.#methods ??= {}).reportProgress = fn;
  }
  // The results are the dependencies' stored JSON: their type is the caller's word (as a payload's).
  get dependencies(): Methods["dependencies"] {
    return this.#method(
      "dependencies",
      () =>
        <R>() =>
          readDependencies(this.#deps.db, this.#run.id, this.#run.tenant) as Promise<DependencyInfo<R>[]>,
    );
  }
  set dependencies(fn: Methods["dependencies"]) {
    (this.#methods ??= {}).dependencies = fn;
  }
  get batch(): Methods["batch"] {
    return this.#method("batch", () => (): Promise<BatchSummary | null> => readBatchSummary(this.#deps.db, this.#run.id, this.#run.tenant));
  }
  set batch(fn: Methods["batch"]) {
    (this.#methods ??= {}).batch = fn;
  }
  get step(): Methods["step"] {
    return this.#method("step", () => (name, fn) => this.#stepRun().step(name, fn));
  }
  set step(fn: Methods["step"]) {
    (this.#methods ??= {}).step = fn;
  }
  get sleep(): Methods["sleep"] {
    return this.#method("sleep", () => (name, seconds) => this.#stepRun().sleep(name, seconds));
  }
  set sleep(fn: Methods["sleep"]) {
    (this.#methods ??= {}).sleep = fn;
  }
  get sleepUntil(): Methods["sleepUntil"] {
    return this.#method("sleepUntil", () => (name, date) => this.#stepRun().sleepUntil(name, date));
  }
  set sleepUntil(fn: Methods["sleepUntil"]) {
    (this.#methods ??= {}).sleepUntil = fn;
  }
  // The data is the sent event's stored JSON: its type is the caller's word (as a payload's).
  get waitForEvent(): Methods["waitForEvent"] {
    return this.#method(
      "waitForEvent",
      () =>
        <T>(name: string, options: WaitForEventOptions) =>
          this.#stepRun().waitForEvent(name, options) as Promise<T | null>,
    );
  }
  set waitForEvent(fn: Methods["waitForEvent"]) {
    (this.#methods ??= {}).waitForEvent = fn;
  }
  // The result is the child's stored JSON: its type is the caller's word.
  get invoke(): Methods["invoke"] {
    return this.#method(
      "invoke",
      () =>
        <R>(name: string, task: string, payload?: unknown, options?: InvokeOptions) =>
          this.#stepRun().invoke(name, task, payload, options) as Promise<R>,
    );
  }
  set invoke(fn: Methods["invoke"]) {
    (this.#methods ??= {}).invoke = fn;
  }

  #method<K extends keyof Methods>(name: K, make: () => Methods[K]): Methods[K] {
    const methods = (this.#methods ??= {});
    return (methods[name] ??= make()) as Methods[K];
  }

  #stepRun(): StepRun {
    return (this.#steps ??= new StepRun({
      db: this.#deps.db,
      job: this.#run,
      lost: () => this.#abort.reason !== null && this.#abort.reason.reason !== "shutdown",
      fenced: (write) => this.#lost(write),
    }));
  }

  /** The job was taken over (a write of this run was refused): say so, and stop the run. */
  #lost(write: "heartbeat" | "checkpoint" | "progress" | "step" | "sleep"): void {
    this.#deps.emitter.emit("job:fenced", { job: this.job, claimToken: this.claimToken, write });
    loseJob(this.#abort, this.job);
  }

  async #heartbeat(): Promise<boolean> {
    const sentAt = new Date();
    const owned = (await extendLeases(this.#deps.db, [{ id: this.#run.id, token: this.#run.token }], this.#deps.lease)).has(this.#run.token);
    if (owned) this.#deps.emitter.emit("job:heartbeat", { job: this.job, claimToken: this.claimToken, sentAt });
    else this.#lost("heartbeat");
    return owned;
  }

  async #checkpoint(progress: unknown, work: ((tx: unknown) => unknown) | undefined): Promise<boolean> {
    const outcome = await saveCheckpoint(this.#deps.db, this.#run, this.#deps.lease, progress, work);
    if (outcome.saved) this.progress = outcome.progress;
    else this.#lost("checkpoint");
    return outcome.saved;
  }
}
