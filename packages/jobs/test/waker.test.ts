// The claim loop's sleep (worker/waker.ts): woken once per job under load, so it must neither
// lose a wake-up nor make a timer per sleep.
import { afterEach, describe, expect, it, vi } from "vitest";
import { Waker } from "../src/worker/waker.js";

describe("the claim loop's waker", () => {
  afterEach(() => vi.restoreAllMocks());

  it("a sleep ends at its timeout, calling onTimeout, or at once on a wake-up, without it", async () => {
    const waker = new Waker();
    const timedOut = vi.fn();
    const t0 = performance.now();
    await waker.sleep(30, timedOut);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
    expect(timedOut).toHaveBeenCalledTimes(1);
    const woken = vi.fn();
    const sleeping = waker.sleep(60_000, woken);
    waker.wake();
    await sleeping;
    expect(woken).not.toHaveBeenCalled();
    waker.close();
  });

  it("a wake-up while no sleep is pending ends the next sleep at once", async () => {
    const waker = new Waker();
    waker.wake();
    const t0 = performance.now();
    await waker.sleep(60_000);
    expect(performance.now() - t0).toBeLessThan(1000);
    waker.close();
  });

  it("one timer serves a thousand sleeps woken early, and a woken sleep's timeout never fires later", async () => {
    const waker = new Waker();
    const setTimeoutSpy = vi.spyOn(globalThis, "setTimeout");
    const timedOut = vi.fn();
    for (let i = 0; i < 1000; i++) {
      const sleeping = waker.sleep(20, timedOut);
      waker.wake();
      await sleeping;
    }
    expect(setTimeoutSpy.mock.calls.filter(([, ms]) => ms === 20)).toHaveLength(1);
    // The armed timer fires into no pending sleep: nothing is called.
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(timedOut).not.toHaveBeenCalled();
    // And a later sleep still times out on it.
    await waker.sleep(20, timedOut);
    expect(timedOut).toHaveBeenCalledTimes(1);
    waker.close();
  });

  it("close disarms the timer, so it holds nothing open", async () => {
    const waker = new Waker();
    const sleeping = waker.sleep(60_000);
    waker.wake();
    await sleeping;
    const clear = vi.spyOn(globalThis, "clearTimeout");
    waker.close();
    expect(clear).toHaveBeenCalledTimes(1);
  });
});
