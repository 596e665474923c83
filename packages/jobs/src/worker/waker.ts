import { timerMs } from "../base/timers.js";

/**
 * The claim loop's sleep: it waits for a duration or until `wake()`. A wake-up that comes
 * while the loop is busy (a start write landing mid-iteration) is kept for its next sleep,
 * never lost — a lost one would leave free slots idle for a whole poll interval.
 */
export class Waker {
  private wakeUp: (() => void) | null = null;
  private wokenWhileBusy = false;

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
      const timer = setTimeout(() => {
        this.wakeUp = null;
        onTimeout?.();
        resolve();
      }, timerMs(ms));
      this.wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
