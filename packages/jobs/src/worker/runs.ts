import { loseJob } from "../base/abort.js";
import type { Handlers } from "../base/types.js";
import type { ClaimedJob } from "../run/claim.js";
import { runHandler } from "../run/execute.js";
import { handBack, settle, type RunDeps, type SettleWrites } from "../run/settle.js";
import type { ClaimPlan } from "./claim-plan.js";
import { moveRun, newRun, type Run, type RunState } from "./run.js";
import { StartWrites, type StartAnswers } from "./start-writes.js";

export interface RunsOptions {
  /** What a run reads and writes through (the worker's). */
  run: RunDeps;
  handlers: Handlers;
  writes: SettleWrites;
  plan: ClaimPlan;
  /** The worker's queues paused as last read: their buffered runs are handed back, never started. */
  paused(): ReadonlySet<string>;
  /** A slot may be free (a handler returned, a start write landed): the claim loop may have something to do. */
  slotsMayBeFree(): void;
  /** A write that ended a run landed where that makes jobs claimable (fair mode, a snooze): claim again now. */
  mayHaveWork(): void;
  /** A success left the completion batch (written, or given up): room for another (see Worker's loop). */
  successWritten(): void;
  onError(error: unknown, during: string): void;
}

/**
 * A worker's runs, each one record with one state (run.ts holds the state machine), from its
 * claim to the write of its verdict: the one owner of a run's life. The worker keeps the claim
 * loop and the lease keeper, and asks this for what they need. Touched only on the worker's
 * event loop (see Worker).
 */
export class WorkerRuns {
  private readonly runs = new Map<string, Run>();
  /** The buffered runs in claim order: the buffered state's queue, not a second owner. */
  private readonly buffered: Run[] = [];
  private readonly count: Record<RunState, number> = { buffered: 0, starting: 0, running: 0, settling: 0 };
  private unwrittenCount = 0;
  /** Every run until its verdict is written. */
  private readonly finishing = new Set<Promise<void>>();
  private readonly starts: StartWrites;

  constructor(private readonly o: RunsOptions) {
    this.starts = new StartWrites(o.run.db, o.run.lease);
  }

  /** Handlers running: the slots taken. */
  get running(): number {
    return this.count.running;
  }

  /** Runs held and not running: buffered, or being started. */
  get held(): number {
    return this.count.buffered + this.count.starting;
  }

  /** Buffered runs, waiting for a slot. */
  get waiting(): number {
    return this.count.buffered;
  }

  /** Successes waiting in the completion batch. */
  get unwritten(): number {
    return this.unwrittenCount;
  }

  /** A claimed job: running at once when the claim counted its attempt (and `run`), else buffered. */
  claimed(job: ClaimedJob, run: boolean): void {
    if (job.started && run) {
      const record = this.add(newRun(job, "running"));
      this.begin(record, Promise.resolve());
    } else {
      this.buffered.push(this.add(newRun(job, "buffered")));
    }
  }

  /** buffered → starting for up to `idle` free slots, in one start write; running when it answers. */
  startInto(idle: number, stopping: () => boolean): void {
    this.handBackPaused();
    const free = idle - this.count.starting;
    if (free <= 0 || this.buffered.length === 0 || !this.starts.open) return;
    const runs = this.buffered.splice(0, free);
    for (const run of runs) this.move(run, "starting");
    this.starts.send(runs, this.answers(stopping));
  }

  /** Buffered runs of a queue paused since their claim: handed back unstarted (their attempt never counted). */
  private handBackPaused(): void {
    const paused = this.o.paused();
    if (paused.size === 0 || this.buffered.length === 0) return;
    for (const run of this.buffered.filter((r) => paused.has(r.job.queue))) {
      this.buffered.splice(this.buffered.indexOf(run), 1);
      this.end(run);
      const back = handBack(run.job, run.info, this.o.run, this.o.writes).catch((error: unknown) => this.o.onError(error, "handing back a job"));
      this.finishing.add(back);
      void back.finally(() => this.finishing.delete(back));
    }
  }

  /** Every claim whose lease the keeper extends: buffered, running, and successes not yet written. */
  claims(): { id: number; token: string }[] {
    const claims: { id: number; token: string }[] = [];
    for (const run of this.runs.values()) {
      if (run.state === "buffered" || run.state === "running" || run.unwritten) claims.push({ id: run.job.id, token: run.job.token });
    }
    return claims;
  }

  /** The lease keeper renewed every claim held when it asked (at `askedAt`, performance.now()). */
  confirmed(askedAt: number): void {
    this.starts.confirmed(askedAt);
  }

  /** The lease keeper kept this claim: its heartbeat event, for a running run. */
  kept(token: string, sentAt: Date): void {
    const run = this.runs.get(token);
    if (run?.state === "running") this.o.run.emitter.emit("job:heartbeat", { job: run.info, claimToken: token, sentAt });
  }

  /**
   * A claim found no longer ours by `write`: a running run's signal fires (its writes will be
   * refused); a buffered one is fenced, never started.
   */
  lost(token: string, write: "start" | "heartbeat"): void {
    const run = this.runs.get(token);
    if (run?.state === "running") {
      this.o.run.emitter.emit("job:fenced", { job: run.info, claimToken: token, write });
      loseJob(run.abort, run.info);
    } else if (run?.state === "buffered") {
      this.buffered.splice(this.buffered.indexOf(run), 1);
      this.end(run);
      this.o.run.emitter.emit("job:fenced", { job: run.info, claimToken: token, write });
    }
  }

  /** The runs whose handlers have not returned. */
  inFlight(): Run[] {
    return [...this.runs.values()].filter((run) => run.state === "running");
  }

  /** Shutdown: once no start write is in flight, the buffered runs leave, to be handed back. */
  async takeBuffered(): Promise<Run[]> {
    await this.starts.idle();
    const runs = this.buffered.splice(0);
    for (const run of runs) this.end(run);
    return runs;
  }

  /** Running runs past the grace period leave, to be handed back, their signal fired by the caller. */
  takeRunning(): Run[] {
    const runs = this.inFlight();
    for (const run of runs) this.end(run);
    return runs;
  }

  /** Settles once every run's verdict is written (or given up). */
  written(): Promise<unknown> {
    return Promise.allSettled(this.finishing);
  }

  /** Closes the start writes' own connection (after the last write). */
  close(): Promise<void> {
    return this.starts.close();
  }

  private answers(stopping: () => boolean): StartAnswers {
    return {
      run: (run, answered) => {
        this.move(run, "running");
        this.begin(run, answered);
      },
      fenced: (run) => {
        this.end(run);
        this.o.run.emitter.emit("job:fenced", { job: run.info, claimToken: run.job.token, write: "start" });
      },
      // Whatever its state by then (its handler may have returned), the start was not ours.
      lost: (run) => {
        this.o.run.emitter.emit("job:fenced", { job: run.info, claimToken: run.job.token, write: "start" });
        if (run.state === "running") loseJob(run.abort, run.info);
      },
      requeue: (runs, leaseInDoubt) => {
        for (const run of runs) {
          this.move(run, "buffered");
          // Until the lease keeper confirms it, its next start waits for the write's answer.
          if (leaseInDoubt) run.heldAt = -Infinity;
        }
        // Back at the front, in claim order.
        this.buffered.unshift(...runs);
      },
      stopping,
      settled: () => this.o.slotsMayBeFree(),
      onError: (error, during) => this.o.onError(error, during),
    };
  }

  /** Entering running: the handler starts, and the run is followed until its verdict is written. */
  private begin(run: Run, answered: Promise<unknown>): void {
    run.answered = answered;
    run.startedAt = Date.now();
    this.o.plan.started(run.job.group);
    this.o.run.emitter.emit("job:started", { job: run.info, claimToken: run.job.token, waitMs: Math.max(0, run.startedAt - run.job.runAt.getTime()) });
    run.done = this.execute(run);
    this.finishing.add(run.done);
    const finished = () => this.finishing.delete(run.done);
    run.done.then(finished, finished);
  }

  private async execute(run: Run): Promise<void> {
    const { job, info } = run;
    const { plan } = this.o;
    const outcome = await runHandler(job, info, this.o.handlers, this.o.run, run.abort);
    const durationMs = Date.now() - run.startedAt;
    plan.prefetch.handlerTook(durationMs);
    // Handed back at shutdown already (its grace ran out): whatever it produced is fenced out.
    if (run.abort.reason?.reason === "shutdown") return;
    // Settling frees the slot now; the write below may wait for its batch.
    this.move(run, "settling");
    this.o.slotsMayBeFree();
    if (outcome.kind === "succeeded") this.setUnwritten(run, true);
    try {
      // A handler may run before its start write is executed (see StartWrites); the write that
      // ends the run goes on another connection and could be executed first, the start write
      // then finding the job no longer running: its attempt never counted.
      await run.answered;
      await settle(job, info, outcome, durationMs, this.o.run, this.o.writes);
    } catch (error) {
      // Abandoned at shutdown with the database unreachable: the lease will bring it back.
      this.o.onError(error, "finishing a job");
    } finally {
      this.end(run);
      if (run.unwritten) {
        this.setUnwritten(run, false);
        this.o.successWritten();
      }
      // Fair mode: the slot of its key and group is free once this write has landed (the row is
      // no longer running), not when the handler returned: claim again now. A job snoozed for
      // 0 s (or a sleep already over) is ready again at once.
      if (plan.isFair || outcome.kind === "snoozed" || outcome.kind === "slept") {
        plan.slotFreed();
        this.o.mayHaveWork();
      }
    }
  }

  private add(run: Run): Run {
    this.runs.set(run.job.token, run);
    this.count[run.state]++;
    return run;
  }

  private move(run: Run, to: RunState): void {
    this.count[run.state]--;
    moveRun(run, to);
    this.count[to]++;
  }

  /** The run leaves the worker: its verdict written, its claim lost, or handed back. */
  private end(run: Run): void {
    if (this.runs.get(run.job.token) !== run) return;
    this.runs.delete(run.job.token);
    this.count[run.state]--;
  }

  private setUnwritten(run: Run, unwritten: boolean): void {
    run.unwritten = unwritten;
    this.unwrittenCount += unwritten ? 1 : -1;
  }
}
