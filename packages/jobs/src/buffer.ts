import type { ClaimedJob } from "./claim.js";
import type { JobsDatabase } from "./db/database.js";
import type { WorkerEmitter } from "./events.js";
import { jobInfo } from "./execute.js";
import { OUTAGE_BACKOFF, backoffMs } from "./retry.js";
import { startRuns } from "./start.js";

/**
 * Start writes in flight at once: a slot freed while one is under way need not wait for it to
 * land and then for another round trip.
 */
const MAX_START_WRITES = 2;

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

  constructor(private readonly deps: BufferDeps) {}

  /** Jobs held and not running: waiting, or being started. */
  get held(): number {
    return this.jobs.length + this.starting;
  }

  get waiting(): number {
    return this.jobs.length;
  }

  /** Slots spoken for by start writes in flight. */
  get startingNow(): number {
    return this.starting;
  }

  push(job: ClaimedJob): void {
    this.jobs.push(job);
  }

  /** Every waiting claim, for lease extension. */
  claims(): { id: number; token: string }[] {
    return this.jobs.map((j) => ({ id: j.id, token: j.token }));
  }

  /** Removes a waiting job whose claim was lost; false if it was not waiting here. */
  drop(token: string): ClaimedJob | null {
    const index = this.jobs.findIndex((j) => j.token === token);
    return index < 0 ? null : (this.jobs.splice(index, 1)[0] as ClaimedJob);
  }

  /**
   * Records the starts of up to `free` waiting jobs in one fenced write (which also renews
   * their leases, lapsed perhaps in a stall), then hands each one still ours to `run`. A job
   * taken over meanwhile is reported fenced and never runs. `stopping()` is asked when the
   * write lands: then the jobs stay here for shutdown to hand back.
   */
  startInto(free: number, run: (job: ClaimedJob) => void, stopping: () => boolean): void {
    if (free <= 0 || this.jobs.length === 0 || this.writes.size >= MAX_START_WRITES || performance.now() < this.retryAt) return;
    const jobs = this.jobs.splice(0, free);
    this.starting += jobs.length;
    const write: Promise<void> = startRuns(this.deps.db, jobs, this.deps.lease)
      .then(
        (owned) => {
          this.failures = 0;
          for (const job of jobs) {
            if (!owned.has(job.token)) this.deps.emitter.emit("job:fenced", { job: jobInfo(job), write: "start" });
            else if (stopping())
              this.jobs.push(job); // handed back (with its attempt) by shutdown
            else run(job);
          }
        },
        (error: unknown) => {
          this.deps.onError(error, "starting jobs");
          // Still held, still unstarted: back to the front, in claim order.
          this.jobs.unshift(...jobs);
          const wait = backoffMs(OUTAGE_BACKOFF, this.failures++);
          this.retryAt = performance.now() + wait;
          setTimeout(() => this.deps.wake(), wait).unref();
        },
      )
      .finally(() => {
        this.starting -= jobs.length;
        this.writes.delete(write);
        this.deps.wake();
      });
    this.writes.add(write);
  }

  /** Waits for start writes in flight, then empties the buffer: the jobs to hand back. */
  async drain(): Promise<ClaimedJob[]> {
    await Promise.all(this.writes);
    return this.jobs.splice(0);
  }
}
