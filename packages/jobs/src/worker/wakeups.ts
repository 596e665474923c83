import type { JobsDatabase } from "../core/database.js";
import type { Listener } from "../db/executor.js";
import { backoffMs, type Backoff } from "../base/retry.js";

/** Re-subscribing after a lost LISTEN connection: polling covers the gap, so no hurry past 30 s. */
const RESUBSCRIBE_BACKOFF: Backoff = { firstMs: 100, maxMs: 30_000 };

/**
 * LISTEN for new ready jobs, where the backend can push (PostgreSQL). On a lost connection it
 * re-subscribes with backoff and then reports a wake-up for every queue, since notifications
 * sent while it was away are gone. Polling stays the fallback either way.
 */
export class Wakeups {
  private listener: Listener | null = null;
  private closed = false;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: JobsDatabase,
    private readonly onWake: (queue: string | null) => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  get supported(): boolean {
    return typeof this.db.executor.listen === "function";
  }

  async start(): Promise<void> {
    if (!this.supported || this.closed) return;
    try {
      const listener = await this.db.executor.listen!(
        this.db.channel,
        (queue) => this.onWake(queue || null),
        (error) => this.lost(error),
      );
      // Closed while it connected (a worker stopped as it started): nobody would close it later.
      if (this.closed) return await listener.close();
      this.listener = listener;
      if (this.failures > 0) this.onWake(null);
      this.failures = 0;
    } catch (error) {
      this.lost(error);
    }
  }

  private lost(error: unknown): void {
    if (this.closed) return;
    this.onError(error);
    const listener = this.listener;
    this.listener = null;
    // Fire and forget: every Listener.close() swallows its own errors (the connection is gone anyway).
    void listener?.close();
    if (this.retryTimer) return;
    const delay = backoffMs(RESUBSCRIBE_BACKOFF, this.failures++);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      // Fire and forget: start() catches its own failure and comes back here through lost().
      void this.start();
    }, delay);
    this.retryTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const listener = this.listener;
    this.listener = null;
    await listener?.close();
  }
}
