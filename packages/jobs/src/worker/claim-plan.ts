import { claimJobs, type ClaimResult } from "../run/claim.js";
import type { JobsDatabase } from "../core/database.js";
import { PrefetchSizer } from "./prefetch.js";
import { ServedGroups } from "../flow/served.js";

/**
 * What a worker's next claim asks for, and what its last one said about the queues: plain
 * (batches, a prefetch buffer) or fair (groups or keys); whether limited keys were met (then
 * the one-statement claim would stand aside); and whether a rate asked it to come back when a
 * token refills.
 * The buffer of a fair claim that took jobs of groups holds at most one job per slot: a group
 * that becomes ready waits behind the whole buffer, so a deep one would undo fair share. Jobs
 * with keys but no group keep the plain prefetch (the buffer drains within two claim round
 * trips): a buffered job counts as running for its key, and the fair claim holds a limited
 * key's job only while the key keeps a slot free besides, so limits hold at any depth.
 */
export class ClaimPlan {
  private fair = false;
  private limited = false;
  /** The last fair claim that took jobs took some of a group (not only of group ''). */
  private grouped = false;
  private retryInMs: number | null = null;
  /** Slots freed so far (their completion landed): a claim that came back short while one was freed may have missed it. */
  private freed = 0;
  private readonly served = new ServedGroups();
  readonly prefetch: PrefetchSizer;

  constructor(
    private readonly concurrency: number,
    prefetch: number | null,
  ) {
    this.prefetch = new PrefetchSizer(concurrency, prefetch);
  }

  /** Jobs the worker should hold, running and buffered. */
  size(): number {
    if (!this.fair || !this.grouped) return this.concurrency + this.prefetch.target();
    return this.concurrency + Math.min(this.concurrency, this.prefetch.target());
  }

  /**
   * Claims up to `capacity` jobs, of which `start` start now; `more`: the claim may have left
   * claimable jobs — it came back full, or a slot freed while it ran.
   */
  async claim(
    db: JobsDatabase,
    base: { queues: readonly string[]; lease: number; workerId: string },
    capacity: number,
    start: number,
  ): Promise<ClaimResult & { more: boolean }> {
    const startedAt = performance.now();
    const freed = this.freed;
    const claimed = await claimJobs(db, { ...base, limit: capacity, start, fair: this.fair, served: this.served.view, limited: this.limited });
    this.prefetch.claimTook(performance.now() - startedAt);
    this.fair = claimed.fair;
    this.limited = claimed.fair && claimed.limited;
    if (!claimed.fair) this.grouped = false;
    else if (claimed.jobs.length > 0) this.grouped = claimed.jobs.some((job) => job.group !== "");
    this.retryInMs = claimed.retryInMs;
    return { ...claimed, more: claimed.jobs.length >= capacity || this.freed !== freed };
  }

  /** A run's completion (or snooze) landed: its group's and key's slot is free in the database. */
  slotFreed(): void {
    this.freed++;
  }

  /** A job of `group` starts: the next fair claims let other groups take their turn first. */
  started(group: string): void {
    this.served.note(group);
  }

  get isFair(): boolean {
    return this.fair;
  }

  /** How long to sleep with nothing to claim: a poll, or less when a rate's token refills sooner. */
  sleepMs(pollMs: number): number {
    const ms = this.retryInMs === null ? pollMs : Math.min(pollMs, Math.max(1, this.retryInMs));
    this.retryInMs = null;
    return ms;
  }
}
