import type { JobsDatabase } from "./db/database.js";
import type { Executor } from "./db/executor.js";
import { toJsonText } from "./payload.js";

/** One text on every backend, the clock being the dialect's. */
function saveProgressSql(db: JobsDatabase): string {
  const now = db.sql.now;
  return `
    UPDATE ${db.table}
    SET progress = $3, heartbeat_at = ${now}, locked_until = ${db.sql.nowPlus("$4")}, updated_at = ${now}
    WHERE id = $1 AND claim_token = $2 AND status = 'running'`;
}

/** The work ran, yet the job had been taken over: everything was rolled back. */
class Fenced extends Error {}

/**
 * Saves a job's progress atomically with the handler's own writes. The fenced UPDATE runs
 * first, so the row stays locked until COMMIT: a reclaim cannot take the job between the check
 * and the commit, and a stale worker's batch never lands.
 */
export async function saveCheckpoint(
  db: JobsDatabase,
  job: { id: number; token: string },
  lease: number,
  progress: unknown,
  work: ((tx: unknown) => unknown) | undefined,
): Promise<boolean> {
  const json = toJsonText(progress, "progress");
  try {
    return await db.executor.transaction(async (tx: Executor) => {
      const { rowCount } = await tx.query(saveProgressSql(db), [job.id, job.token, json, lease]);
      if (rowCount === 0) throw new Fenced();
      if (work) await work(tx.raw);
      return true;
    });
  } catch (error) {
    if (error instanceof Fenced) return false;
    throw error;
  }
}
