import { RunAbort, loseJob } from "../base/abort.js";
import type { ClaimedJob } from "../run/claim.js";
import type { ClaimPlan } from "./claim-plan.js";
import { jobInfo, runHandler } from "../run/execute.js";
import { settle, type RunDeps, type SettleWrites } from "../run/settle.js";
import type { Handlers, JobInfo } from "../base/types.js";

/** One handler run, from its start until the write of its outcome. */
export interface Run {
  job: ClaimedJob;
  info: JobInfo;
  abort: RunAbort;
  startedAt: number;
  /** Its start write's answer: the write that ends the run waits for it. */
  answered: Promise<unknown>;
  done: Promise<void>;
}

export interface RunsOptions {
  /** What a run reads and writes through (the worker's). */
  run: RunDeps;
  handlers: Handlers;
  writes: SettleWrites;
  plan: ClaimPlan;
  /** A handler returned: its slot is free. */
  slotFreed(): void;
  /** A write that ended a run landed where that makes jobs claimable (fair mode, a snooze): claim again now. */
  mayHaveWork(): void;
  /** A success left the completion batch (written, or given up): room for another (see Worker's loop). */
  successWritten(): void;
  onError(error: unknown, during: string): void;
}

/**
 * A worker's runs: the handlers running (each holds a slot), and, until its outcome is written,
 * every run whose handler has returned. `completing` holds the runs whose success waits in the
 * completion batch: their leases are still extended until the batch lands. Touched only on the
 * worker's event loop (see Worker).
 */
export class WorkerRuns {
  private readonly running = new Map<string, Run>();
  private readonly completing = new Map<string, number>();
  /** Every run until its outcome is written (a run leaves `running` when its handler returns). */
  private readonly finishing = new Set<Promise<void>>();

  constructor(private readonly o: RunsOptions) {}

  /** Handlers running: the slots taken. */
  get size(): number {
    return this.running.size;
  }

  get(token: string): Run | undefined {
    return this.running.get(token);
  }

  /** Successes waiting in the completion batch. */
  get unwritten(): number {
    return this.completing.size;
  }

  /** The runs whose handlers have not returned. */
  inFlight(): Run[] {
    return [...this.running.values()];
  }

  /** Every claim a run holds: its handler running, or its success not yet written. */
  claims(): { id: number; token: string }[] {
    return [...[...this.running.values()].map((r) => ({ id: r.job.id, token: r.job.token })), ...[...this.completing].map(([token, id]) => ({ id, token }))];
  }

  /** Settles once every run's outcome is written (or given up). */
  written(): Promise<unknown> {
    return Promise.allSettled(this.finishing);
  }

  /** `answered`: when the write that counted the job's attempt was answered (at once when the claim counted it). */
  start(job: ClaimedJob, answered: Promise<unknown> = Promise.resolve()): void {
    const info = jobInfo(job);
    this.o.plan.started(job.group);
    const startedAt = Date.now();
    const run = { job, info, abort: new RunAbort(), startedAt, answered } as Run;
    this.running.set(job.token, run);
    this.o.run.emitter.emit("job:started", { job: info, claimToken: job.token, waitMs: Math.max(0, startedAt - job.runAt.getTime()) });
    run.done = this.execute(run);
    this.finishing.add(run.done);
    const finished = () => this.finishing.delete(run.done);
    run.done.then(finished, finished);
  }

  /** A running job found no longer ours: its run's signal fires; its writes will be refused. */
  lost(job: ClaimedJob, write: "start" | "heartbeat"): void {
    const run = this.running.get(job.token);
    this.o.run.emitter.emit("job:fenced", { job: run?.info ?? jobInfo(job), claimToken: job.token, write });
    if (run) loseJob(run.abort, run.info);
  }

  private async execute(run: Run): Promise<void> {
    const { job, info } = run;
    const { plan } = this.o;
    const outcome = await runHandler(job, info, this.o.handlers, this.o.run, run.abort);
    const durationMs = Date.now() - run.startedAt;
    plan.prefetch.handlerTook(durationMs);
    // Free the slot now; the write below may wait for its batch.
    this.running.delete(job.token);
    this.o.slotFreed();
    if (run.abort.reason?.reason === "shutdown") return; // handed back already; whatever it produced is fenced out
    if (outcome.kind === "succeeded") this.completing.set(job.token, job.id);
    try {
      // A handler may run before its start write is executed (see WorkerBuffer.startInto); the
      // write that ends the run goes on another connection and could be executed first, the
      // start write then finding the job no longer running: its attempt never counted.
      await run.answered;
      await settle(job, info, outcome, durationMs, this.o.run, this.o.writes);
    } catch (error) {
      // Abandoned at shutdown with the database unreachable: the lease will bring it back.
      this.o.onError(error, "finishing a job");
    } finally {
      if (this.completing.delete(job.token)) this.o.successWritten();
      // Fair mode: the slot of its key and group is free once this write has landed (the row is
      // no longer running), not when the handler returned: claim again now. A job snoozed for
      // 0 s is ready again at once.
      if (plan.isFair || outcome.kind === "snoozed") {
        plan.slotFreed();
        this.o.mayHaveWork();
      }
    }
  }
}
