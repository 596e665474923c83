import { performance } from "node:perf_hooks";
import { sleep } from "../lib/stats.js";
import type { Payload, QueueSystem } from "../systems/types.js";

/** A job's payload here: its number and when it was handed to enqueue (performance.now() of this process). */
type Stamped = Payload & { at: number };

/** What happened since the last `take()`. */
export interface LoadWindow {
  /** Jobs whose enqueue call returned. */
  enqueued: number;
  /** Jobs whose handler returned. */
  completed: number;
  /** Enqueue calls that failed (their jobs are not counted as enqueued). */
  enqueueErrors: number;
  /** Enqueue → handler start, in ms, one per job started. */
  pickups: number[];
}

/** A fixed-rate producer and a worker whose handler takes `workMs`, on one queue system. */
export interface Load {
  setRate(rate: number): void;
  take(): LoadWindow;
  stop(): Promise<void>;
}

export interface LoadOptions {
  rate: number;
  workMs: number;
  concurrency: number;
  variant: string;
}

const TICK_MS = 10;
/** Rows per enqueue call, as the public harness's bulk producers (PRODUCER_BATCH_MAX). */
const BATCH_MAX = 128;
/** Enqueue calls in flight at once; what is owed beyond waits for the next tick. */
const MAX_IN_FLIGHT = 4;

/**
 * Offered load is credited on real elapsed time, not per tick (the harness's CONTRIBUTING_ADAPTERS
 * "producer pacing" rule): a slow tick or a slow insert makes the next calls larger, so the
 * offered rate holds whatever the database does.
 */
export async function startLoad(system: QueueSystem, options: LoadOptions): Promise<Load> {
  let rate = options.rate;
  let window: LoadWindow = { enqueued: 0, completed: 0, enqueueErrors: 0, pickups: [] };
  let seq = 0;
  const worker = await system.startWorker({
    concurrency: options.concurrency,
    variant: options.variant,
    onJob: async (payload) => {
      window.pickups.push(performance.now() - (payload as Stamped).at);
      await sleep(options.workMs);
      window.completed++;
    },
  });

  let credit = 0;
  let last = performance.now();
  let inFlight = 0;
  const calls = new Set<Promise<void>>();
  const tick = () => {
    const now = performance.now();
    credit += (rate * (now - last)) / 1000;
    last = now;
    while (credit >= 1 && inFlight < MAX_IN_FLIGHT) {
      const n = Math.min(BATCH_MAX, Math.floor(credit));
      credit -= n;
      const at = performance.now();
      const payloads: Stamped[] = Array.from({ length: n }, () => ({ i: seq++, at }));
      inFlight++;
      const call = system.enqueueBulk(payloads).then(
        () => void (window.enqueued += n),
        (error: unknown) => {
          if (window.enqueueErrors++ === 0) console.error(`enqueue failed: ${(error as Error).message}`);
        },
      );
      calls.add(call);
      void call.finally(() => {
        inFlight--;
        calls.delete(call);
      });
    }
  };
  const producing = setInterval(tick, TICK_MS);

  return {
    setRate(next) {
      tick();
      rate = next;
    },
    take() {
      const taken = window;
      window = { enqueued: 0, completed: 0, enqueueErrors: 0, pickups: [] };
      return taken;
    },
    async stop() {
      clearInterval(producing);
      await Promise.allSettled([...calls]);
      await worker.stop();
    },
  };
}
