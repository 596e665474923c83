/**
 * Node fires a timer whose delay is over 2³¹−1 ms after 1 ms (with a warning): an idle worker
 * given a poll interval of a month would poll a thousand times a second. Every duration the
 * queue hands to a timer goes through this cap instead; a timer that fires after ~24.8 days
 * and finds nothing due simply waits again.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms`, capped to what a Node timer can wait. */
export function timerMs(ms: number): number {
  return Math.min(ms, MAX_TIMER_MS);
}

/** Waits for `work`, or `ms`, whichever comes first. */
export async function within(ms: number, work: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise((r) => (timer = setTimeout(r, timerMs(ms))))]);
  clearTimeout(timer);
}

/**
 * Runs `task` every `ms` while `active()`, never two at once (a slow round is skipped, not
 * queued); its errors go to `onError`. The timer does not keep the process alive.
 */
export function repeat(ms: number, task: () => Promise<void>, options: { active: () => boolean; onError: (error: unknown) => void }): NodeJS.Timeout {
  let busy = false;
  const timer = setInterval(
    () => {
      if (busy || !options.active()) return;
      busy = true;
      task()
        .catch(options.onError)
        .finally(() => (busy = false));
    },
    timerMs(Math.max(10, ms)),
  );
  timer.unref();
  return timer;
}
