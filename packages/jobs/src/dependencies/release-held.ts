import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { releaseAfterEnd } from "./flow-release.js";

/**
 * Cancelling a failed job that holds others (the "hold" policy, sequences): it is marked
 * cancelled where it lies, in history, and the jobs it held are released as a cancellation
 * releases them, in the caller's transaction. Any other failed job is left as it is (cancelJob
 * answers false): a failure is only rewritten when that lets waiting work go on.
 */
export async function cancelHoldingFailed(db: JobsDatabase, tx: Executor, id: number, tenant: string | null): Promise<boolean> {
  const lock = db.dialect === "sqlite" ? "" : " FOR UPDATE";
  const { rows } = await tx.query<{ id: number | string }>(
    `SELECT h.id FROM ${db.historyTable} h
     WHERE h.id = $1 AND h.status = 'failed'${tenant === null ? "" : " AND h.tenant = $2"}
       AND EXISTS (SELECT 1 FROM ${db.dependenciesTable} e JOIN ${db.table} w ON w.id = e.job_id
                   WHERE e.depends_on_id = h.id AND e.holds = ${db.sql.boolean(true)} AND w.status = 'waiting')${lock}`,
    tenant === null ? [id] : [id, tenant],
  );
  if (rows.length === 0) return false;
  // finished_at stays: it says when the job ended, and places it in history's partitions.
  await tx.query(`UPDATE ${db.historyTable} SET status = 'cancelled', updated_at = ${db.sql.now} WHERE id = $1`, [id]);
  // Its batch (if any) counted it when it failed: only the dependents are settled again.
  await releaseAfterEnd(db, tx, [{ id, status: "cancelled", hasDependents: true, batchId: null }]);
  return true;
}
