import type { JobsDatabase } from "../core/database.js";
import { answerWaits, notifyAnswered } from "./answer-waits.js";
import { isMissingTable } from "../flow/flow-overview.js";

/** Waits answered per transaction: a long backlog of timeouts is taken in short transactions. */
const TIMEOUT_BATCH = 100;

/**
 * Ends the waits whose timeout passed (database clock): each job is due again now, its wait
 * step answered null. Run by every worker's sweep (worker/sweep.ts), not by the claim: a waiting
 * job is outside the claim's index, and the claim is the hot path. SKIP LOCKED: two sweeps, or a
 * sweep and a sendEvent, never answer a job twice nor wait on each other. Returns how many.
 */
export async function endTimedOutWaits(db: JobsDatabase): Promise<number> {
  let total = 0;
  for (;;) {
    const answered = await db.executor
      .transaction(async (tx) => {
        const rows = await answerWaits(db, tx, { where: `w.timeout_at <= ${db.sql.now}`, params: [], skipLocked: true, limit: TIMEOUT_BATCH }, null);
        await notifyAnswered(db, tx, rows);
        return rows.length;
      })
      // A worker of this version on a schema before migration 20: no wait to end yet.
      .catch((error: unknown) => {
        if (isMissingTable(error)) return 0;
        throw error;
      });
    total += answered;
    if (answered < TIMEOUT_BATCH) return total;
  }
}
