import type { JobsDatabase } from "../core/database.js";
import type { Logger } from "../base/logger.js";
import { repeat } from "../base/timers.js";
import { upgradeFinished } from "../maintenance/upgrade.js";

/**
 * A worker's share of the online upgrade (maintenance/upgrade.ts): once started, it moves the
 * ended jobs an older version left in the live table into history, a small batch at a time,
 * until none is left, then never looks again for the rest of its life. One worker at a time is
 * enough: a worker that finds another upgrading gives way and looks again later.
 */

/** A worker's first look, after its start; the claim loop is under way by then. */
const FIRST_LOOK_MS = 1000;
/** Between passes while rows remain (another worker upgrading, rows locked by someone else). */
const AGAIN_MS = 30_000;
/** Rows per transaction: small, so each holds its locks (SQLite: the file's) briefly. */
const BATCH = 500;

/**
 * Starts the background upgrade; the returned timer is the worker's to clear at shutdown.
 * Between batches it waits as long as the batch took, so it uses at most half of one connection.
 */
export function upgradeInBackground(
  db: JobsDatabase,
  logger: Logger,
  workerId: string,
  maintenance: { active: () => boolean; onError: (error: unknown) => void },
): NodeJS.Timeout {
  let nextAt = Date.now() + FIRST_LOOK_MS;
  let finished = false;
  return repeat(
    FIRST_LOOK_MS,
    async () => {
      if (finished || Date.now() < nextAt) return;
      nextAt = Date.now() + AGAIN_MS;
      const result = await upgradeFinished(db, { batchSize: BATCH, turn: "skip", active: maintenance.active, pauseMs: (batchMs) => batchMs });
      if (result.moved > 0) {
        logger.info({ workerId, moved: result.moved, remaining: result.remaining }, `moved ${result.moved} ended job(s) from the live table into history`);
      }
      finished = result.remaining === 0;
    },
    maintenance,
  );
}
