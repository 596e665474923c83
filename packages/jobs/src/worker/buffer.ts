import type { ClaimedJob } from "../run/claim.js";
import type { JobsDatabase } from "../core/database.js";
import type { WorkerEmitter } from "../core/events.js";
import { jobInfo } from "../run/execute.js";
import { OUTAGE_BACKOFF, backoffMs } from "../base/retry.js";
import { sendStarts } from "../run/start.js";
import type { OrderedSender } from "../db/executor.js";

/**
 * Start writes in flight at once: a slot freed while one is under way need not wait for it to
 * land and then for another round trip.
 */
const MAX_START_WRITES = 2;

/**
 * How long the start-write connection may have been silent and still be trusted with a write
 * whose handlers run before its answer. A busy worker writes far more often; after a pause, the
 * first start write waits for its answer, one round trip.
 */
const SENDER_QUIET_MS = 1000;

export interface BufferDeps {
  db: JobsDatabase;
  lease: number;
  emitter: WorkerEmitter;
  onError(error: unknown, during: string): void;
  /** The claim loop may have something to do (a start write landed). */
  wake(): void;
}

/**
 * A worker's claimed-but-unstarted jobs (see start.ts for the rule: their attempts are counted
 * by the start write just before they run). Owned by one worker, touched only on its event
 * loop: the claim loop pushes, `startInto` moves jobs to free slots, the lease keeper reads
 * `claims()` and drops what it lost, shutdown takes the rest back.
 */
export class WorkerBuffer {
  private readonly jobs: ClaimedJob[] = [];
  /** Taken from `jobs`, their start write in flight; they hold slots. */
  private starting = 0;
  private readonly writes = new Set<Promise<void>>();
  private retryAt = 0;
  private failures = 0;
  /** When each waiting job was claimed (performance.now()); with `confirmedAt`, how fresh its lease is. */
  private readonly heldAt = new Map<string, number>();
  private confirmedAt = 0;
  /** Where start writes go without a round trip (PostgreSQL), or null. */
  private readonly sender: OrderedSender | null;

  constructor(private readonly deps: BufferDeps) {
    this.sender = deps.db.executor.orderedSender?.() ?? null;
  }

  /** Jobs held and not running: waiting, or being started. */
  get held(): number {
    return this.jobs.length + this.starting;
  }

  get waiting(): number {
    return this.jobs.length;
  }

  push(job: ClaimedJob): void {
    this.jobs.push(job);
    this.heldAt.set(job.token, performance.now());
  }

  /**
   * Back at the front, in claim order, after a failed start write: their leases are in doubt,
   * so until the lease keeper confirms them their next start waits for the answer.
   */
  private requeue(jobs: readonly ClaimedJob[]): void {
    this.jobs.unshift(...jobs);
    for (const job of jobs) this.heldAt.set(job.token, -Infinity);
  }

  /** Every waiting claim, for lease extension. */
  claims(): { id: number; token: string }[] {
    return this.jobs.map((j) => ({ id: j.id, token: j.token }));
  }

  /** Removes a waiting job whose claim was lost; null if it was not waiting here. */
  drop(token: string): ClaimedJob | null {
    this.heldAt.delete(token);
    const index = this.jobs.findIndex((j) => j.token === token);
    return index < 0 ? null : (this.jobs.splice(index, 1)[0] as ClaimedJob);
  }

  /**
   * Records the starts of waiting jobs for the `idle` slots not taken by start writes already in
   * flight, in one fenced write (which also renews their leases), then hands them to `run`.
   * While their leases are fresh (held or confirmed less than half a lease ago, so nobody else
   * can have them), handlers run as soon as the write has left (see sendStarts) and its answer
   * is checked after: a job found not ours (cancelled meanwhile) goes to `lost`. Past that, as
   * after a stall, the answer comes first and a job taken over meanwhile never runs.
   * `stopping()` is asked before running: then the jobs stay here for shutdown to hand back.
   * `run` gets, besides the job, when its start write was answered: the write that ends the run
   * must wait for it (see Worker.execute).
   */
  startInto(idle: number, run: (job: ClaimedJob, answered: Promise<unknown>) => void, lost: (job: ClaimedJob) => void, stopping: () => boolean): void {
    const free = idle - this.starting;
    if (free <= 0 || this.jobs.length === 0 || this.writes.size >= MAX_START_WRITES || performance.now() < this.retryAt) return;
    const jobs = this.jobs.splice(0, free);
    this.starting += jobs.length;
    const now = performance.now();
    // Only where a write can be known to have left without its answer (see sendStarts): elsewhere
    // `sent` is the answer, and the answer is checked before anything runs.
    // And only on a connection heard from lately: a write into a connection that died unnoticed
    // (a failover) would run its handlers with their attempts never counted.
    const fresh =
      this.sender !== null &&
      this.sender.answeredWithin(SENDER_QUIET_MS) &&
      jobs.every((job) => now - Math.max(this.heldAt.get(job.token) ?? 0, this.confirmedAt) < (this.deps.lease * 1000) / 2);
    for (const job of jobs) this.heldAt.delete(job.token);
    const write = sendStarts(this.deps.db, this.sender, jobs, this.deps.lease);
    // Failed, the answer tells nothing more (the server may or may not have run the write).
    const answered: Promise<unknown> = write.owned.catch(() => undefined);
    const runAll = (owned: Set<string> | null) => {
      this.failures = 0;
      for (const job of jobs) {
        if (owned && !owned.has(job.token)) this.deps.emitter.emit("job:fenced", { job: jobInfo(job), claimToken: job.token, write: "start" });
        else if (stopping())
          this.push(job); // handed back (with its attempt) by shutdown
        else run(job, answered);
      }
    };
    const started: Promise<void> = (fresh ? write.sent.then(() => runAll(null)) : write.owned.then(runAll))
      .catch((error: unknown) => {
        this.deps.onError(error, "starting jobs");
        // Not sent: still held, still unstarted.
        this.requeue(jobs);
        const wait = backoffMs(OUTAGE_BACKOFF, this.failures++);
        this.retryAt = performance.now() + wait;
        setTimeout(() => this.deps.wake(), wait).unref();
      })
      .finally(() => {
        this.starting -= jobs.length;
        this.writes.delete(started);
        this.deps.wake();
      });
    this.writes.add(started);
    if (fresh) {
      write.owned.then(
        (owned) => jobs.filter((job) => !owned.has(job.token)).forEach(lost),
        // Sent, so the handlers run; the server may or may not have counted their attempts.
        (error: unknown) => this.deps.onError(error, "recording job starts"),
      );
    }
  }

  /** The lease keeper renewed every claim held when it asked (at `askedAt`, performance.now()). */
  confirmed(askedAt: number): void {
    this.confirmedAt = Math.max(this.confirmedAt, askedAt);
  }

  /** Waits for start writes in flight, then empties the buffer: the jobs to hand back. */
  async drain(): Promise<ClaimedJob[]> {
    await Promise.all(this.writes);
    this.heldAt.clear();
    return this.jobs.splice(0);
  }

  /** Closes the start writes' own connection, if any (after the last write). */
  close(): Promise<void> {
    return this.sender?.close() ?? Promise.resolve();
  }
}
