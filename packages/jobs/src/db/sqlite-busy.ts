import { backoffMs, delay, retrying, type Backoff } from "../base/retry.js";

/** How long SQLite itself waits for another connection's write lock before answering SQLITE_BUSY. */
export const SQLITE_BUSY_TIMEOUT_MS = 5000;
/** After that, the executor keeps retrying (with backoff, without blocking the event loop) this long. */
export const BUSY_RETRY_FOR_MS = 60_000;

export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code === "SQLITE_BUSY" || code.startsWith("SQLITE_BUSY_"));
}

/**
 * Runs `attempt` now (synchronously: inside a caller's synchronous `db.transaction(...)` the
 * statement must land before it commits). On SQLITE_BUSY — SQLite already waited
 * `busy_timeout` — retries with backoff on timers, so the event loop is not blocked; BUSY
 * never reaches the caller unless the lock stays taken for over a minute.
 */
export function withBusyRetry<T>(attempt: () => T, retry: boolean): Promise<T> {
  try {
    return Promise.resolve(attempt());
  } catch (error) {
    if (!retry || !isBusy(error)) return Promise.reject(error as Error);
    return retryBusy(attempt);
  }
}

/** SQLite waited busy_timeout already; past that, short jittered steps until the writer lets go. */
const BUSY_BACKOFF: Backoff = { firstMs: 5, maxMs: 200, jitter: true };

async function retryBusy<T>(attempt: () => T): Promise<T> {
  const deadline = Date.now() + BUSY_RETRY_FOR_MS;
  await delay(backoffMs(BUSY_BACKOFF, 0));
  return retrying(async () => attempt(), { backoff: BUSY_BACKOFF, giveUp: (_failures, error) => !isBusy(error) || Date.now() > deadline });
}
