/** Retry delays double from 10 s and stop growing at 600 s: 10, 20, 40, 80, 160, 320, then 600 s for every later retry. */
export const RETRY_BASE_SECONDS = 10;
export const RETRY_CAP_SECONDS = 600;

/** Delay before the next attempt, after attempt number `attempt` (1-based) failed. */
export function retryDelaySeconds(attempt: number): number {
  const exponent = Math.max(0, attempt - 1);
  // 2^6 * 10 = 640 already passes the cap; stop before the power overflows for huge counts.
  if (exponent >= 6) return RETRY_CAP_SECONDS;
  return Math.min(RETRY_BASE_SECONDS * 2 ** exponent, RETRY_CAP_SECONDS);
}
