/**
 * How long to wait before trying again after `failures` failures in a row: doubling from
 * `firstMs`, capped at `maxMs`, with ±50% jitter where many processes may retry the same
 * thing at once (a deadlock, a busy file). One schedule shape for every retry of the queue's
 * own statements; each caller names its constants.
 */
export interface Backoff {
  firstMs: number;
  maxMs: number;
  jitter?: boolean;
}

/** The worker's claims, start writes and failure writes riding out a database outage. */
export const OUTAGE_BACKOFF: Backoff = { firstMs: 100, maxMs: 10_000 };
/** A completion batch that failed (the batch stays; a lost connection is the usual cause). */
export const BATCH_BACKOFF: Backoff = { firstMs: 50, maxMs: 5_000 };

export function backoffMs(backoff: Backoff, failures: number): number {
  // 2 ** 30 already passes any cap: stop before the power grows for long outages.
  const ms = Math.min(backoff.maxMs, backoff.firstMs * 2 ** Math.min(Math.max(0, failures), 30));
  return backoff.jitter ? ms * (0.5 + Math.random()) : ms;
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Runs `attempt` until it succeeds. After each failure: `onError`, then `giveUp(failures,
 * error)` may end it (rethrowing the error), else it waits `backoff` and tries again.
 */
export async function retrying<T>(
  attempt: () => Promise<T>,
  options: { backoff: Backoff; onError?: (error: unknown) => void; giveUp?: (failures: number, error: unknown) => boolean },
): Promise<T> {
  for (let failures = 0; ;) {
    try {
      return await attempt();
    } catch (error) {
      options.onError?.(error);
      failures++;
      if (options.giveUp?.(failures, error)) throw error;
      await delay(backoffMs(options.backoff, failures - 1));
    }
  }
}
