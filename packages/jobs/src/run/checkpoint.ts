import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { toJsonText } from "../base/payload.js";

/** One text on every backend, the clock being the dialect's. A NULL `$3` keeps the saved progress. */
export function saveProgressSql(db: JobsDatabase): string {
  const now = db.sql.now;
  return `
    UPDATE ${db.table}
    SET progress = COALESCE($3, progress), heartbeat_at = ${now}, locked_until = ${db.sql.nowPlus("$4")}, updated_at = ${now}
    WHERE id = $1 AND claim_token = $2 AND status = 'running'`;
}

/** The row is already locked and fenced by this transaction's first UPDATE. */
function setProgressSql(db: JobsDatabase): string {
  return `UPDATE ${db.table} SET progress = $2 WHERE id = $1`;
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
  /** A value, or a function of what `work` returned: progress that counts what the work did. */
  progress: unknown,
  work: ((tx: unknown) => unknown) | undefined,
): Promise<{ saved: false } | { saved: true; progress: unknown }> {
  const later = typeof progress === "function" ? (progress as (result: unknown) => unknown) : undefined;
  const json = later === undefined ? toJsonText(progress, "progress") : null;
  try {
    return await db.executor.transaction(async (tx: Executor) => {
      const { rowCount } = await tx.query(saveProgressSql(db), [job.id, job.token, json, lease]);
      if (rowCount === 0) throw new Fenced();
      const result = work ? await work(tx.raw) : undefined;
      if (later === undefined) return { saved: true, progress };
      const value = later(result);
      await tx.query(setProgressSql(db), [job.id, toJsonText(value, "progress")]);
      return { saved: true, progress: value };
    });
  } catch (error) {
    if (error instanceof Fenced) return { saved: false };
    throw error;
  }
}
