import { JobAbortedError } from "../base/abort.js";
import { type Batcher, MAX_BATCH } from "./batcher.js";
import { workerWrites } from "./settle-writes.js";
import type { ClaimedJob } from "../run/claim.js";
import { ClaimPlan } from "./claim-plan.js";
import type { Completion } from "../run/complete.js";
import type { JobsDatabase } from "../core/database.js";
import { WorkerEmitter, type WorkerEventName, type WorkerListener } from "../core/events.js";
import { jobInfo } from "../run/execute.js";
import { EXTENSIONS_PER_LEASE, extendLeases } from "../run/lease.js";
import { sweepLostJobs } from "./sweep.js";
import { OUTAGE_BACKOFF, backoffMs } from "../base/retry.js";
import { WorkerRuns } from "./runs.js";
import { handBack, type RunDeps, type SettleWrites } from "../run/settle.js";
import { instrumentEmitter } from "../core/telemetry.js";
import { repeat, within } from "../base/timers.js";
import type { Handlers, JobInfo } from "../base/types.js";
import { schedulerPass } from "../schedules/scheduler.js";
import { Waker } from "./waker.js";
import { upgradeInBackground } from "./background-upgrade.js";
import { WorkerRegistry } from "./registry.js";
import { Wakeups } from "./wakeups.js";
import { PausedQueues } from "./paused.js";
import { workerSettings, type WorkerOptions, type WorkerSettings } from "./worker-options.js";

export type { WorkerOptions } from "./worker-options.js";

/** Completions still unwritten at shutdown get at least this long to land. */
const MIN_FLUSH_MS = 1000;
/**
 * Successes waiting for their completion write before the worker claims no more: one full
 * completion statement. Handlers free their slots before their success is written, so a
 * database slow to complete would otherwise let them pile up without end, each one more lease
 * to extend and one more job to run again if the process dies: the worker slows with its
 * database instead.
 */
const MAX_UNWRITTEN = MAX_BATCH;

/**
 * created → running: `run()` starts the claim loop, the lease keeper and the sweep.
 * running → stopping: `stop()` or the signal; nothing more is claimed or started, buffered
 *   runs are handed back, running ones get `gracePeriod`, then are handed back too.
 * stopping → stopped: completions flushed (or abandoned), timers and wake-ups closed.
 *
 * The worker keeps the claim loop, the lease keeper and shutdown; each run's life, from its
 * claim to its verdict, is WorkerRuns' (runs.ts, its states in run.ts). Both are touched only
 * on this event loop, never across an await that assumes them unchanged.
 */
export class Worker {
  readonly id: string;
  private state: "created" | "running" | "stopping" | "stopped" = "created";
  private readonly settings: WorkerSettings;
  private readonly db: JobsDatabase;
  private readonly emitter: WorkerEmitter;
  private readonly deps: RunDeps;
  private readonly writes: SettleWrites;
  private readonly plan: ClaimPlan;
  private readonly completions: Batcher<Completion, boolean>;
  private readonly wakeups: Wakeups;
  private readonly runs: WorkerRuns;
  private readonly paused: PausedQueues;
  private readonly timers: NodeJS.Timeout[] = [];
  private mayHaveWork = true;
  private idleAnnounced = false;
  /** The loop is waiting on a claim (see slotsMayBeFree). */
  private claiming = false;
  /** The loop left claiming to the completion batch (MAX_UNWRITTEN): its next write wakes it. */
  private awaitingWrites = false;
  private fillPending = false;
  private readonly waker = new Waker();
  private looping: Promise<void> = Promise.resolve();
  private stopped: Promise<void> | null = null;
  private registry: WorkerRegistry | null = null;

  constructor(
    private readonly handlers: Handlers,
    private readonly options: WorkerOptions = {},
  ) {
    this.settings = workerSettings(options);
    this.id = this.settings.id;
    this.db = this.settings.db;
    this.emitter = new WorkerEmitter(options.events);
    instrumentEmitter(this.emitter);
    this.deps = { db: this.db, lease: this.settings.lease, emitter: this.emitter, logger: this.settings.logger, progressMs: this.settings.progressMs };
    this.plan = new ClaimPlan(this.settings.concurrency, this.settings.prefetch);
    ({ completions: this.completions, writes: this.writes } = workerWrites(
      this.db,
      () => this.state === "running",
      (error, during) => this.error(error, during),
    ));
    this.paused = new PausedQueues(this.db, this.settings.queues, this.settings.pollMs, (error) => this.error(error, "reading paused queues"));
    this.runs = new WorkerRuns({
      run: this.deps,
      handlers: this.handlers,
      writes: this.writes,
      plan: this.plan,
      paused: () => this.paused.paused,
      slotsMayBeFree: () => this.slotsMayBeFree(),
      mayHaveWork: () => {
        this.mayHaveWork = true;
        this.waker.wake();
      },
      successWritten: () => {
        if (this.awaitingWrites) this.waker.wake();
      },
      onError: (error, during) => this.error(error, during),
    });
    this.wakeups = new Wakeups(
      this.db,
      (queue) => {
        if (queue === null) this.paused.expire();
        if (queue === null || this.settings.queues.includes(queue)) {
          this.mayHaveWork = true;
          this.waker.wake();
        }
      },
      (error) => this.error(error, "listening for new jobs"),
    );
  }

  on<E extends WorkerEventName>(name: E, listener: WorkerListener<E>): () => void {
    return this.emitter.on(name, listener);
  }

  /** Runs until the signal fires or `stop()` is called; resolves once stopped. */
  async run(): Promise<void> {
    if (this.state !== "created") throw new Error(`this worker is already ${this.state}`);
    this.state = "running";
    const { queues, concurrency, lease, sweepMs } = this.settings;
    const signal = this.options.signal;
    const onAbort = () => void this.stop();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      this.registry = new WorkerRegistry(this.db, this.settings);
      await Promise.all([this.wakeups.start(), this.registry.register((error) => this.error(error, "joining the workers registry"))]);
      // Stopped while starting (the signal fired during the await): shutdown has run already;
      // timers started now would outlive it and keep the process alive.
      if (this.state !== "running") return await this.stop();
      const maintenance = { active: () => this.state === "running", onError: (error: unknown) => this.error(error, "background maintenance") };
      this.timers.push(repeat((lease * 1000) / EXTENSIONS_PER_LEASE, () => this.extendAll(), maintenance));
      if (sweepMs > 0) this.timers.push(repeat(sweepMs, () => sweepLostJobs(this.db, this.emitter, this.deps.logger), maintenance));
      if (this.settings.schedules) this.timers.push(repeat(this.settings.pollMs, schedulerPass(this.db, this.settings.pollMs, this.deps.logger), maintenance));
      this.timers.push(upgradeInBackground(this.db, this.deps.logger, this.id, maintenance));
      this.timers.push(this.registry.keep(maintenance));
      this.emitter.emit("worker:started", { workerId: this.id, queues, concurrency });
      this.deps.logger.info({ workerId: this.id, queues, concurrency }, "worker started");
      if (this.db.executor.pollingNotice) this.deps.logger.info({ workerId: this.id }, this.db.executor.pollingNotice);
      if (!signal?.aborted) await (this.looping = this.loop().finally(() => this.waker.close()));
      await this.stop();
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Graceful stop: resolves once in-flight jobs have finished or been handed back. */
  stop(): Promise<void> {
    this.stopped ??= this.shutdown();
    return this.stopped;
  }

  private async loop(): Promise<void> {
    const { concurrency, lease } = this.settings;
    let failures = 0;
    while (this.state === "running") {
      if (this.paused.due && (await this.paused.refresh())) this.mayHaveWork = true;
      this.fill();
      const size = this.plan.size();
      const held = this.runs.running + this.runs.held;
      const capacity = Math.min(size - held, MAX_UNWRITTEN - this.runs.unwritten);
      this.awaitingWrites = capacity < size - held;
      // Claim in batches: wait until half the room is free, unless slots would sit idle.
      const worthIt = capacity >= Math.max(1, Math.ceil(size / 2)) || (this.runs.waiting === 0 && capacity > 0);
      if (this.mayHaveWork && worthIt && this.paused.claimable.length > 0) {
        try {
          // Free slots start their jobs with the claim; the rest wait unstarted (see start.ts).
          this.claiming = true;
          // Cleared before the claim, not after: a wake-up that arrives while it runs (a job
          // committed after its statement read the table) must survive an empty answer.
          this.mayHaveWork = false;
          const claimed = await this.plan
            .claim(this.db, { queues: this.paused.claimable, lease, workerId: this.id }, capacity, Math.max(0, concurrency - held))
            .finally(() => (this.claiming = false));
          const jobs = claimed.jobs;
          failures = 0;
          if (claimed.throttled.length > 0) this.emitter.emit("worker:throttled", { workerId: this.id, keys: claimed.throttled, retryInMs: claimed.retryInMs });
          if (claimed.more) this.mayHaveWork = true;
          if (this.emitter.has("job:claimed")) for (const job of jobs) this.emitter.emit("job:claimed", { job: jobInfo(job), claimToken: job.token });
          // Stopping meanwhile: every run is held buffered, for shutdown to hand back.
          for (const job of jobs) this.runs.claimed(job, this.state === "running");
          if (jobs.length > 0) this.idleAnnounced = false;
          continue;
        } catch (error) {
          this.mayHaveWork = true;
          this.error(error, "claiming jobs");
          await this.waker.sleep(backoffMs(OUTAGE_BACKOFF, failures++));
          continue;
        }
      }
      if (this.runs.running === 0 && this.runs.held === 0 && !this.idleAnnounced) {
        this.idleAnnounced = true;
        this.emitter.emit("worker:idle", { workerId: this.id });
      }
      await this.waker.sleep(this.plan.sleepMs(this.settings.pollMs), () => (this.mayHaveWork = true));
    }
  }

  /**
   * A slot freed or a start write landed: the loop has something to do. While it waits on a
   * claim, buffered jobs still start here, since the buffer is there to keep the slots busy
   * during claims; deferred to the end of the tick, so slots freed together start together, in
   * one start write.
   */
  private slotsMayBeFree(): void {
    this.waker.wake();
    if (!this.claiming || this.fillPending) return;
    this.fillPending = true;
    setImmediate(() => {
      this.fillPending = false;
      if (this.claiming) this.fill();
    });
  }

  /** Starts buffered jobs in the free slots. */
  private fill(): void {
    if (this.state !== "running") return;
    this.runs.startInto(this.settings.concurrency - this.runs.running, () => this.state !== "running");
  }

  /** The lease keeper: extends every held claim; a claim found lost stops its run, or its buffered run never starts. */
  private async extendAll(): Promise<void> {
    const claims = this.runs.claims();
    if (claims.length === 0) return;
    const askedAt = performance.now();
    const sentAt = new Date();
    const owned = await extendLeases(this.db, claims, this.settings.lease);
    this.runs.confirmed(askedAt);
    for (const { token } of claims) {
      if (owned.has(token)) this.runs.kept(token, sentAt);
      else this.runs.lost(token, "heartbeat");
    }
  }

  private async shutdown(): Promise<void> {
    this.state = "stopping";
    this.emitter.emit("worker:stopping", { workerId: this.id, inFlight: this.runs.running });
    this.waker.wake();
    // A claim or a start write in flight adds buffered runs when it lands: wait for both.
    await this.looping;
    const buffered = await this.runs.takeBuffered();
    await Promise.all(buffered.map((run) => this.handBack(run.job, run.info)));
    const inFlight = this.runs.inFlight();
    if (inFlight.length > 0) await within(this.settings.graceMs, Promise.all(inFlight.map((r) => r.done)));
    const late = this.runs.takeRunning();
    for (const run of late) run.abort.abort(new JobAbortedError("shutdown", `worker ${this.id} is shutting down; job ${run.job.id} was handed back`));
    await Promise.all(late.map((run) => this.handBack(run.job, run.info)));
    // Runs whose handlers returned may still wait to write (for a start write's answer, a batch).
    await within(
      Math.max(this.settings.graceMs, MIN_FLUSH_MS),
      this.runs.written().then(() => this.completions.idle()),
    );
    this.completions.abandon(new Error("worker stopped before this completion could be written"));
    await this.runs.close();
    for (const t of this.timers) clearInterval(t);
    await this.registry?.remove().catch((error: unknown) => this.error(error, "leaving the workers registry"));
    await this.wakeups.close();
    this.state = "stopped";
    this.emitter.emit("worker:stopped", { workerId: this.id });
    this.deps.logger.info({ workerId: this.id }, "worker stopped");
  }

  private handBack(job: ClaimedJob, info: JobInfo): Promise<void> {
    return handBack(job, info, this.deps, this.writes).catch(() => undefined);
  }

  private error(error: unknown, during: string): void {
    this.emitter.emit("worker:error", { workerId: this.id, error, during });
    this.deps.logger.error({ workerId: this.id, during, err: error instanceof Error ? error.message : String(error) }, `worker error while ${during}`);
  }
}

export function createWorker(handlers: Handlers, options: WorkerOptions = {}): Worker {
  return new Worker(handlers, options);
}

/**
 * Runs a worker until `signal` fires; resolves once it has stopped gracefully. A bad option
 * rejects the promise (it never throws synchronously).
 */
export async function runWorker(handlers: Handlers, options: WorkerOptions = {}): Promise<void> {
  return new Worker(handlers, options).run();
}
