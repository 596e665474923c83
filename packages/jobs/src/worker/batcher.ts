import { BATCH_BACKOFF, backoffMs, delay, type Backoff } from "../base/retry.js";

/** Items a flush writes at most, in one statement. */
export const MAX_BATCH = 1000;

/**
 * Gathers items and writes them in one statement per flush, with at most one flush in
 * flight: under load, items arriving during a flush form the next batch (backpressure without
 * timers); when idle, an item is flushed at once. A failed flush is retried with backoff —
 * its items are never dropped; the caller learns of each failure through `onError`.
 */
export class Batcher<T, R> {
  private queue: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
  private flushing: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly onError: (error: unknown) => void,
    private readonly maxBatch = MAX_BATCH,
    private readonly backoff: Backoff = BATCH_BACKOFF,
  ) {}

  get size(): number {
    return this.queue.length;
  }

  add(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.flushing) this.flushing = this.loop();
    });
  }

  /** Resolves once everything added so far is written (or given up after `abandon`). */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  /** Stop retrying: pending items reject (the lease brings their jobs back). */
  abandon(reason: Error): void {
    this.stopped = true;
    for (const entry of this.queue.splice(0)) entry.reject(reason);
  }

  private async loop(): Promise<void> {
    try {
      // Let the items resolved in this same turn of the event loop join the first batch.
      await new Promise<void>((resolve) => setImmediate(resolve));
      let failures = 0;
      while (this.queue.length > 0 && !this.stopped) {
        const batch = this.queue.slice(0, this.maxBatch);
        try {
          const results = await this.write(batch.map((e) => e.item));
          this.queue.splice(0, batch.length);
          batch.forEach((entry, i) => entry.resolve(results[i] as R));
          failures = 0;
        } catch (error) {
          this.onError(error);
          await delay(backoffMs(this.backoff, failures++));
        }
      }
    } finally {
      this.flushing = null;
    }
  }
}
