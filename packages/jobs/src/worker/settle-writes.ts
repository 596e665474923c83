import { Batcher } from "./batcher.js";
import { completeRuns, type Completion } from "../run/complete.js";
import type { JobsDatabase } from "../core/database.js";
import { OUTAGE_BACKOFF, retrying } from "../base/retry.js";
import type { SettleWrites } from "../run/settle.js";

/** Failure writes attempted this many times once the worker is stopping, then left to the lease. */
const WRITES_WHEN_STOPPING = 4;

/**
 * How a worker writes its runs' outcomes: completions batched (one statement for many), every
 * other write retried through a database outage — until the worker is stopping, when it gives up
 * after a few tries and leaves the job to its lease, so shutdown never waits on a dead database.
 */
export function workerWrites(
  db: JobsDatabase,
  running: () => boolean,
  onError: (error: unknown, during: string) => void,
): { completions: Batcher<Completion, boolean>; writes: SettleWrites } {
  const completions = new Batcher<Completion, boolean>(
    async (items) => {
      // By token, not id: a stale run and its successor may complete in the same batch.
      const kept = await completeRuns(db, items);
      return items.map((c) => kept.has(c.token));
    },
    (error) => onError(error, "completing jobs"),
  );
  const writes: SettleWrites = {
    complete: (completion) => completions.add(completion),
    persist: (write, during) =>
      retrying(write, {
        backoff: OUTAGE_BACKOFF,
        onError: (error) => onError(error, during),
        giveUp: (failures) => !running() && failures >= WRITES_WHEN_STOPPING,
      }),
  };
  return { completions, writes };
}
