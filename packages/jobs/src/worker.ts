import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { Batcher } from "./batcher.js";
import { claimJobs, type ClaimedJob } from "./claim.js";
import { completeRuns, type Completion } from "./complete.js";
import { resolveDb, type DbLike } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { JobError } from "./errors.js";
import { WorkerEmitter, type WorkerEventHandlers, type WorkerEventName, type WorkerListener } from "./events.js";
import { JobAbortedError, RunAbort, jobInfo, loseJob, recordFailure, runHandler, type RunDeps } from "./execute.js";
import { failJob } from "./fail.js";
import { DEFAULT_LEASE_SECONDS, extendLeases } from "./lease.js";
import { silentLogger, type Logger } from "./logger.js";
import { reclaimJobs } from "./reclaim.js";
import { startRuns } from "./start.js";
import type { Handlers, JobInfo } from "./types.js";
import { checkInteger, checkKnownOptions, checkName, checkSeconds } from "./validate.js";
import { timerMs } from "./timers.js";
import { Wakeups } from "./wakeups.js";
import { instrumentEmitter } from "./telemetry.js";

export interface WorkerOptions {
  /** A queue name or a list of them. Default "default". */
  queue?: string | readonly string[];
  /** Handlers running at once. Default 10. */
  concurrency?: number;
  /**
   * Jobs claimed ahead of free slots, so a finished job's slot refills without a round trip.
   * Default "auto": as many as finish during two claim round trips (measured), at most 500 —
   * large batches for quick jobs, next to none for slow ones (no worker hoards long jobs).
   */
  prefetch?: number | "auto";
  /** Seconds between polls when no wake-up arrives (delayed jobs, backends without LISTEN). Default 1. */
  pollInterval?: number;
  /** Seconds a claim lasts; extended automatically while the job runs. Default 30. */
  lease?: number;
  /** Seconds in-flight jobs get to finish on shutdown before they are handed back. Default 10. */
  gracePeriod?: number;
  /** Seconds between this worker's sweeps for jobs of lost workers (0 = never). Default 5. */
  sweepInterval?: number;
  /** Stops the worker (gracefully) when it fires. */
  signal?: AbortSignal;
  db?: DbLike;
  events?: WorkerEventHandlers;
  logger?: Logger;
  /** Shown in `locked_by` and in reclaim messages. Default host:pid:random. */
  workerId?: string;
}

const WORKER_KEYS = ["queue", "concurrency", "prefetch", "pollInterval", "lease", "gracePeriod", "sweepInterval", "signal", "db", "events", "logger", "workerId"];
const CLAIM_RETRY_MS = [100, 250, 500, 1000, 2000, 5000, 10000];
const MAX_AUTO_PREFETCH = 500;
/**
 * Start writes in flight at once: a slot freed while one is under way need not wait for it to
 * land and then for another round trip.
 */
const MAX_START_WRITES = 2;

/** Exponentially weighted: recent runs count most, one outlier does not swing the batch size. */
function average(previous: number, sample: number): number {
  return previous * 0.9 + sample * 0.1;
}

interface Run {
  job: ClaimedJob;
  info: JobInfo;
  abort: RunAbort;
  startedAt: number;
  done: Promise<void>;
}

/**
 * States: created → running (claims, runs, extends leases, sweeps) → stopping (claims nothing,
 * hands back buffered jobs, waits `gracePeriod` for in-flight ones, then hands them back too)
 * → stopped. `run()` resolves on stopped.
 *
 * Ownership: `buffer` and `running` are touched only by the claim loop, `start`, the lease
 * tick and shutdown — all on this one event loop, never across an await that assumes them
 * unchanged. `completing` holds tokens whose success waits in the batcher; their leases are
 * still extended until the batch lands.
 */
export class Worker {
  readonly id: string;
  private readonly emitter: WorkerEmitter;
  private readonly db: JobsDatabase;
  private readonly deps: RunDeps;
  private readonly queues: readonly string[];
  private readonly concurrency: number;
  /** A fixed prefetch, or null for "auto" (see `prefetchTarget`). */
  private readonly fixedPrefetch: number | null;
  /** Running averages (ms) that size the automatic prefetch; written by `execute` and `loop`. */
  private handlerMs: number | null = null;
  private claimMs = 2;
  private readonly pollMs: number;
  private readonly graceMs: number;
  private readonly sweepMs: number;
  private readonly completions: Batcher<Completion, boolean>;
  private readonly wakeups: Wakeups;

  /** Claimed, not started: their attempts are counted by `startRuns` just before they run. */
  private readonly buffer: ClaimedJob[] = [];
  /** Taken from the buffer, their start being recorded (`startRuns` in flight); they hold slots. */
  private starting = 0;
  private readonly startWrites = new Set<Promise<void>>();
  /** performance.now() before which no start is retried after a failed start write. */
  private startRetryAt = 0;
  private startFailures = 0;
  private readonly running = new Map<string, Run>();
  private readonly completing = new Map<string, number>();
  private mayHaveWork = true;
  private stopping = false;
  private started = false;
  private wakeUp: (() => void) | null = null;
  private wokenWhileBusy = false;
  private idleAnnounced = false;
  private stopped: Promise<void> | null = null;
  private looping: Promise<void> = Promise.resolve();
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly handlers: Handlers,
    private readonly options: WorkerOptions = {},
  ) {
    checkKnownOptions(options, WORKER_KEYS, "runWorker");
    const queues = options.queue === undefined ? ["default"] : typeof options.queue === "string" ? [options.queue] : [...options.queue];
    if (queues.length === 0) throw new JobError("queue: give at least one queue name", "queue");
    this.queues = queues.map((q, i) => checkName(q, typeof options.queue === "string" ? "queue" : `queue[${i}]`));
    this.concurrency = options.concurrency === undefined ? 10 : checkInteger(options.concurrency, "concurrency", 1, 10_000);
    this.fixedPrefetch = options.prefetch === undefined || options.prefetch === "auto" ? null : checkInteger(options.prefetch, "prefetch", 0, 10_000);
    this.pollMs = (options.pollInterval === undefined ? 1 : checkSeconds(options.pollInterval, "pollInterval", 0.001)) * 1000;
    this.graceMs = (options.gracePeriod === undefined ? 10 : checkSeconds(options.gracePeriod, "gracePeriod")) * 1000;
    this.sweepMs = (options.sweepInterval === undefined ? 5 : checkSeconds(options.sweepInterval, "sweepInterval")) * 1000;
    const lease = options.lease === undefined ? DEFAULT_LEASE_SECONDS : checkSeconds(options.lease, "lease", 0.001);
    this.id = options.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.db = resolveDb(options.db).forWorker();
    if (!this.db.executor.pooled) {
      throw new JobError("runWorker needs a pool or a database from connect(), not a single client: it runs several statements at once", "db");
    }
    this.emitter = new WorkerEmitter(options.events);
    instrumentEmitter(this.emitter);
    this.deps = { db: this.db, lease, emitter: this.emitter, logger: options.logger ?? silentLogger };
    this.completions = new Batcher(
      async (items) => {
        // By token, not id: a stale run and its successor may complete in the same batch.
        const kept = await completeRuns(this.db, items);
        return items.map((c) => kept.has(c.token));
      },
      (error) => this.error(error, "completing jobs"),
    );
    this.wakeups = new Wakeups(
      this.db,
      (queue) => {
        if (queue === null || this.queues.includes(queue)) {
          this.mayHaveWork = true;
          this.wake();
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
    if (this.started) throw new Error("this worker is already running");
    this.started = true;
    const signal = this.options.signal;
    const onAbort = () => void this.stop();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await this.wakeups.start();
      this.every(this.deps.lease * 1000 / 3, () => this.extendAll());
      if (this.sweepMs > 0) this.every(this.sweepMs, () => this.sweep());
      this.emitter.emit("worker:started", { workerId: this.id, queues: this.queues, concurrency: this.concurrency });
      this.deps.logger.info({ workerId: this.id, queues: this.queues, concurrency: this.concurrency }, "worker started");
      if (!signal?.aborted) await (this.looping = this.loop());
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
    let failures = 0;
    while (!this.stopping) {
      this.startBuffered();
      const size = this.concurrency + this.prefetchTarget();
      const held = this.running.size + this.starting + this.buffer.length;
      const capacity = size - held;
      // Claim in batches: wait until half the room is free, unless slots would sit idle.
      const worthIt = capacity >= Math.max(1, Math.ceil(size / 2)) || (this.buffer.length === 0 && capacity > 0);
      if (this.mayHaveWork && worthIt) {
        try {
          const claimStarted = performance.now();
          // Free slots start their jobs with the claim; the rest wait unstarted (see start.ts).
          const start = Math.max(0, this.concurrency - held);
          const jobs = await claimJobs(this.db, { queues: this.queues, limit: capacity, lease: this.deps.lease, workerId: this.id, start });
          this.claimMs = average(this.claimMs, performance.now() - claimStarted);
          failures = 0;
          if (jobs.length < capacity) this.mayHaveWork = false;
          if (this.emitter.has("job:claimed")) for (const job of jobs) this.emitter.emit("job:claimed", { job: jobInfo(job) });
          // Stopping meanwhile: everything goes to the buffer, which shutdown hands back.
          for (const job of jobs) {
            if (job.started && !this.stopping) this.start(job);
            else this.buffer.push(job);
          }
          if (jobs.length > 0) this.idleAnnounced = false;
          continue;
        } catch (error) {
          this.error(error, "claiming jobs");
          await this.sleep(CLAIM_RETRY_MS[Math.min(failures++, CLAIM_RETRY_MS.length - 1)] as number);
          continue;
        }
      }
      if (this.running.size === 0 && this.buffer.length === 0 && !this.idleAnnounced) {
        this.idleAnnounced = true;
        this.emitter.emit("worker:idle", { workerId: this.id });
      }
      await this.sleep(this.pollMs, () => (this.mayHaveWork = true));
    }
  }

  /** Jobs to hold beyond the running ones: enough to cover two claim round trips at full speed. */
  private prefetchTarget(): number {
    if (this.fixedPrefetch !== null) return this.fixedPrefetch;
    if (this.handlerMs === null) return this.concurrency;
    const needed = Math.ceil((2 * this.concurrency * this.claimMs) / Math.max(this.handlerMs, 0.01));
    return Math.min(MAX_AUTO_PREFETCH, needed);
  }

  /**
   * Moves buffered jobs into free slots: one fenced write records their starts (and renews
   * their leases, which may have lapsed in a stall), then their handlers run. At most
   * MAX_START_WRITES at a time; slots freed meanwhile are filled by the next.
   */
  private startBuffered(): void {
    if (this.startWrites.size >= MAX_START_WRITES || this.stopping || this.buffer.length === 0 || performance.now() < this.startRetryAt) return;
    const free = this.concurrency - this.running.size - this.starting;
    if (free <= 0) return;
    const jobs = this.buffer.splice(0, free);
    this.starting += jobs.length;
    const write: Promise<void> = startRuns(this.db, jobs, this.deps.lease)
      .then(
        (owned) => {
          this.startFailures = 0;
          for (const job of jobs) {
            if (!owned.has(job.token)) this.emitter.emit("job:fenced", { job: jobInfo(job), write: "start" });
            else if (this.stopping) this.buffer.push(job); // shutdown hands it back (and its attempt)
            else this.start(job);
          }
        },
        (error: unknown) => {
          this.error(error, "starting jobs");
          // Still held, still unstarted: back to the front of the buffer, in claim order.
          this.buffer.unshift(...jobs);
          this.startRetryAt = performance.now() + (CLAIM_RETRY_MS[Math.min(this.startFailures++, CLAIM_RETRY_MS.length - 1)] as number);
          setTimeout(() => this.wake(), CLAIM_RETRY_MS[Math.min(this.startFailures - 1, CLAIM_RETRY_MS.length - 1)]).unref();
        },
      )
      .finally(() => {
        this.starting -= jobs.length;
        this.startWrites.delete(write);
        this.wake();
      });
    this.startWrites.add(write);
  }

  private start(job: ClaimedJob): void {
    const info = jobInfo(job);
    const startedAt = Date.now();
    const run = { job, info, abort: new RunAbort(), startedAt } as Run;
    this.running.set(job.token, run);
    this.emitter.emit("job:started", { job: info, waitMs: Math.max(0, startedAt - job.runAt.getTime()) });
    run.done = this.execute(run);
  }

  private async execute(run: Run): Promise<void> {
    const { job, info } = run;
    const outcome = await runHandler(job, info, this.handlers, this.deps, run.abort);
    const durationMs = Date.now() - run.startedAt;
    this.handlerMs = this.handlerMs === null ? durationMs : average(this.handlerMs, durationMs);
    // Free the slot now; the write below may wait for its batch.
    this.running.delete(job.token);
    this.wake();
    if (run.abort.reason?.reason === "shutdown") {
      return; // handed back already; whatever it produced is fenced out
    }
    try {
      if (outcome.kind === "succeeded") {
        this.completing.set(job.token, job.id);
        const kept = await this.completions.add({ id: job.id, token: job.token, result: outcome.result });
        if (kept) {
          this.emitter.emit("job:succeeded", { job: info, durationMs });
          // Not even built for the default silent logger: one object and one string per job.
          if (this.deps.logger !== silentLogger) this.deps.logger.debug({ jobId: job.id, task: job.task, queue: job.queue, attempt: job.attempt, durationMs }, `job ${job.id} done`);
        } else {
          this.emitter.emit("job:fenced", { job: info, write: "complete" });
        }
      } else {
        await this.persist(() => recordFailure(job, info, outcome, this.deps, durationMs), "recording a failure");
      }
    } catch (error) {
      // Abandoned at shutdown with the database unreachable: the lease will bring it back.
      this.error(error, "finishing a job");
    } finally {
      this.completing.delete(job.token);
    }
  }

  /** Retries a write through a database outage until it lands or the worker must stop. */
  private async persist(write: () => Promise<void>, during: string): Promise<void> {
    for (let failures = 0; ; failures++) {
      try {
        return await write();
      } catch (error) {
        this.error(error, during);
        if (this.stopping && failures >= 3) throw error;
        await new Promise((r) => setTimeout(r, CLAIM_RETRY_MS[Math.min(failures, CLAIM_RETRY_MS.length - 1)]));
      }
    }
  }

  private async extendAll(): Promise<void> {
    const claims = [
      ...[...this.running.values()].map((r) => ({ id: r.job.id, token: r.job.token })),
      ...this.buffer.map((j) => ({ id: j.id, token: j.token })),
      ...[...this.completing].map(([token, id]) => ({ id, token })),
    ];
    if (claims.length === 0) return;
    const tokens = claims.map((c) => c.token);
    const owned = await extendLeases(this.db, claims, this.deps.lease);
    for (const token of tokens) {
      if (owned.has(token)) continue;
      const run = this.running.get(token);
      if (run) {
        this.emitter.emit("job:fenced", { job: run.info, write: "heartbeat" });
        loseJob(run.abort, run.info);
      }
      const index = this.buffer.findIndex((j) => j.token === token);
      if (index >= 0) {
        const [lost] = this.buffer.splice(index, 1);
        this.emitter.emit("job:fenced", { job: jobInfo(lost as ClaimedJob), write: "heartbeat" });
      }
    }
  }

  private async sweep(): Promise<void> {
    for (const job of await reclaimJobs(this.db, null, null)) {
      this.emitter.emit("job:reclaimed", { job });
      this.deps.logger.warn({ jobId: job.id, task: job.task, queue: job.queue, attempt: job.attempts, status: job.status }, `job ${job.id} reclaimed from a lost worker`);
    }
  }

  private async release(job: ClaimedJob, info: JobInfo): Promise<void> {
    const written = await failJob(this.db, job.id, job.token, { kind: "release" }, null);
    this.emitter.emit(written ? "job:released" : "job:fenced", written ? { job: info } : { job: info, write: "release" });
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    this.emitter.emit("worker:stopping", { workerId: this.id, inFlight: this.running.size });
    this.wake();
    // A claim or a start write in flight adds to the buffer when it lands: wait for both.
    await this.looping;
    await Promise.all(this.startWrites);
    const buffered = this.buffer.splice(0);
    await Promise.all(buffered.map((job) => this.persist(() => this.release(job, jobInfo(job)), "handing back a job").catch(() => undefined)));
    const inFlight = [...this.running.values()];
    if (inFlight.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(inFlight.map((r) => r.done)), new Promise((r) => (timer = setTimeout(r, timerMs(this.graceMs))))]);
      clearTimeout(timer);
    }
    const late = [...this.running.values()];
    for (const run of late) run.abort.abort(new JobAbortedError("shutdown", `worker ${this.id} is shutting down; job ${run.job.id} was handed back`));
    await Promise.all(late.map((run) => this.persist(() => this.release(run.job, run.info), "handing back a job").catch(() => undefined)));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.completions.idle(), new Promise((r) => (timer = setTimeout(r, timerMs(Math.max(this.graceMs, 1000)))))]);
    clearTimeout(timer);
    this.completions.abandon(new Error("worker stopped before this completion could be written"));
    for (const t of this.timers) clearInterval(t);
    await this.wakeups.close();
    this.emitter.emit("worker:stopped", { workerId: this.id });
    this.deps.logger.info({ workerId: this.id }, "worker stopped");
  }

  private every(ms: number, task: () => Promise<void>): void {
    let busy = false;
    const timer = setInterval(() => {
      if (busy || this.stopping) return;
      busy = true;
      task()
        .catch((error: unknown) => this.error(error, "background maintenance"))
        .finally(() => (busy = false));
    }, timerMs(Math.max(10, ms)));
    timer.unref();
    this.timers.push(timer);
  }

  private error(error: unknown, during: string): void {
    this.emitter.emit("worker:error", { workerId: this.id, error, during });
    this.deps.logger.error({ workerId: this.id, during, err: error instanceof Error ? error.message : String(error) }, `worker error while ${during}`);
  }

  /** A wake-up that came while the loop was busy (a start write landing mid-iteration) is kept for its next sleep. */
  private wake(): void {
    const wake = this.wakeUp;
    this.wakeUp = null;
    if (wake) wake();
    else this.wokenWhileBusy = true;
  }

  private sleep(ms: number, onTimeout?: () => void): Promise<void> {
    if (this.wokenWhileBusy) {
      this.wokenWhileBusy = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wakeUp = null;
        onTimeout?.();
        resolve();
      }, timerMs(ms));
      this.wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
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
