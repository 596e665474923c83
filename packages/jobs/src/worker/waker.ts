import { timerMs } from "../base/timers.js";

/**
 * The claim loop's sleep: it waits for a duration or until `wake()`. A wake-up that comes
 * while the loop is busy (a start write landing mid-iteration) is kept for its next sleep,
 * never lost — a lost one would leave free slots idle for a whole poll interval.
 *
 * Under load the loop sleeps and is woken about once per job (a slot frees, a write lands).
 * One timer serves every sleep: a wake-up leaves it armed rather than cancelling it, the next
 * sleep of the same length re-arms it (`refresh`), and a firing with no sleep pending does
 * nothing — where a timer made and cancelled per sleep cost a measurable share of a no-op
 * job's CPU. `close` disarms it once the loop has ended, so it never holds the process open.
 */
export class Waker {
  private wakeUp: (() => void) | null = null;
  private wokenWhileBusy = false;
  private timer: NodeJS.Timeout | null = null;
  private armedMs = 0;
  /** The pending sleep's end by timeout, or null when no sleep is pending. */
  private onFire: (() => void) | null = null;

  wake(): void {
    const wake = this.wakeUp;
    this.wakeUp = null;
    if (wake) wake();
    else this.wokenWhileBusy = true;
  }

  /** Resolves after `ms`, calling `onTimeout` first, or at once on a wake-up. */
  sleep(ms: number, onTimeout?: () => void): Promise<void> {
    if (this.wokenWhileBusy) {
      this.wokenWhileBusy = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.onFire = () => {
        this.wakeUp = null;
        onTimeout?.();
        resolve();
      };
      this.wakeUp = () => {
        this.onFire = null;
        resolve();
      };
      this.arm(timerMs(ms));
    });
  }

  /** Disarms the timer: the loop is over. */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.onFire = null;
  }

  private arm(ms: number): void {
    if (this.timer && this.armedMs === ms) {
      // Counts `ms` from now again, and re-activates a timer that has fired.
      this.timer.refresh();
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.armedMs = ms;
    this.timer = setTimeout(() => {
      const fire = this.onFire;
      this.onFire = null;
      fire?.();
    }, ms);
  }
}
