import type { JobsDatabase } from "../core/database.js";
import { readPausedQueues } from "../maintenance/pause.js";

/**
 * A poll timer may fire a little before its interval is over: a read that counted as not due
 * then would wait a second interval, and a pause would take two polls to be seen.
 */
const EARLY_TIMER_SHARE = 0.9;

/**
 * Which of a worker's queues are paused (pauseQueue), as last read: the claim loop reads the
 * paused queues at most once per poll interval and again after a wake-up that may mean a pause
 * or a resume (`expire`), so a claim cycle learns of a pause without a round trip of its own.
 * Written by the claim loop only (`refresh`); WorkerRuns reads `paused` before it starts a
 * buffered job, the claim reads `claimable`.
 */
export class PausedQueues {
  private pausedNow: ReadonlySet<string> = new Set();
  private claimableNow: readonly string[];
  private readAt = -Infinity;

  constructor(
    private readonly db: JobsDatabase,
    private readonly queues: readonly string[],
    private readonly pollMs: number,
    private readonly onError: (error: unknown) => void,
  ) {
    this.claimableNow = queues;
  }

  /** The worker's queues that are paused. */
  get paused(): ReadonlySet<string> {
    return this.pausedNow;
  }

  /** The worker's queues that are not paused: what its claims ask for. */
  get claimable(): readonly string[] {
    return this.claimableNow;
  }

  /** Whether a read is due: the last one is a poll interval old, or a wake-up expired it. */
  get due(): boolean {
    return performance.now() - this.readAt >= this.pollMs * EARLY_TIMER_SHARE;
  }

  /** A wake-up that may follow a pause or resume (or a lost LISTEN connection): read again before the next claim. */
  expire(): void {
    this.readAt = -Infinity;
  }

  /**
   * Reads the paused queues; true when one of this worker's queues was resumed (it may have jobs
   * to claim now). A failed read keeps what was known and is tried again at the next poll.
   */
  async refresh(): Promise<boolean> {
    // Before the read: a wake-up that expires it meanwhile asks for another.
    this.readAt = performance.now();
    let all: Set<string>;
    try {
      all = await readPausedQueues(this.db);
    } catch (error) {
      this.onError(error);
      return false;
    }
    const paused = new Set(this.queues.filter((queue) => all.has(queue)));
    const resumed = [...this.pausedNow].some((queue) => !paused.has(queue));
    this.pausedNow = paused;
    this.claimableNow = paused.size === 0 ? this.queues : this.queues.filter((queue) => !paused.has(queue));
    return resumed;
  }
}
