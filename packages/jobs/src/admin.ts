import { resolveDb } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { JobError } from "./errors.js";
import { ADMIN_OPTION_KEYS, PRUNE_OPTION_KEYS, checkOptions, type AdminOptions, type PruneOptions } from "./options.js";
import { isUniqueViolation } from "./sql-errors.js";
import { checkJobId, checkSeconds, checkTenant, describe } from "./validate.js";

export type { AdminOptions, PruneOptions } from "./options.js";

/** Checked before anything runs: a typo'd option (`tenantId`) must not act unscoped. */
function checkAdminCall(id: unknown, options: AdminOptions, where: string): { db: JobsDatabase; tenant: string | null } {
  checkOptions(options, ADMIN_OPTION_KEYS, where);
  checkJobId(id);
  const tenant = checkTenant(options.tenant, "tenant", "any tenant's job");
  return { db: resolveDb(options.db), tenant };
}

/**
 * Cancels a pending or running job. A running handler sees its `ctx.signal` fire at its
 * worker's next lease extension, and its completion is refused (fenced).
 */
export async function cancelJob(id: number, options: AdminOptions = {}): Promise<boolean> {
  const { db, tenant } = checkAdminCall(id, options, "cancelJob");
  const { rowCount } = await db.executor.query(
    `UPDATE ${db.table} SET status = 'cancelled', claim_token = NULL, locked_until = NULL, finished_at = ${db.sql.now}, updated_at = ${db.sql.now}
     WHERE id = $1 AND status IN ('pending', 'running')${tenant === null ? "" : " AND tenant = $2"}`,
    tenant === null ? [id] : [id, tenant],
  );
  return rowCount > 0;
}

/**
 * Puts a failed or cancelled job back in its queue now, with one more attempt allowed. A job
 * whose dedup key another pending or running job holds meanwhile cannot be: a JobError says so.
 */
export async function retryJob(id: number, options: AdminOptions = {}): Promise<boolean> {
  const { db, tenant } = checkAdminCall(id, options, "retryJob");
  try {
    const { rowCount } = await db.executor.query(
      `UPDATE ${db.table} SET status = 'pending', run_at = ${db.sql.now}, finished_at = NULL, updated_at = ${db.sql.now},
         max_attempts = CASE WHEN max_attempts > attempts THEN max_attempts ELSE attempts + 1 END
       WHERE id = $1 AND status IN ('failed', 'cancelled')${tenant === null ? "" : " AND tenant = $2"}`,
      tenant === null ? [id] : [id, tenant],
    );
    return rowCount > 0;
  } catch (error) {
    // Back to pending makes the job an active holder of its dedup key again: the only unique
    // index this UPDATE can run into.
    if (!isUniqueViolation(error, db.dialect)) throw error;
    throw await dedupKeyHeld(db, id);
  }
}

async function dedupKeyHeld(db: JobsDatabase, id: number): Promise<JobError> {
  // Inside a caller's PostgreSQL transaction the violation aborted it, and this read fails too.
  const holder = await db.executor
    .query<{ dedup_key: string; id: number | string }>(
      `SELECT j.dedup_key, h.id FROM ${db.table} j JOIN ${db.table} h ON h.dedup_key = j.dedup_key AND h.status IN ('pending', 'running')
       WHERE j.id = $1`,
      [id],
    )
    .then((r) => r.rows[0])
    .catch(() => undefined);
  const held = holder ? `its dedupKey ${JSON.stringify(holder.dedup_key)} is held by job ${Number(holder.id)}` : "its dedupKey is held by another job";
  return new JobError(`retryJob: job ${id} cannot be retried: ${held}, pending or running; cancel that job or wait until it ends, then retry`, "id");
}

const FINISHED = ["done", "failed", "cancelled"] as const;

/** A non-empty list of finished states: anything else would delete nothing, or be an SQL error (`IN ()`). */
function checkStatuses(value: unknown): readonly string[] {
  if (value === undefined) return FINISHED;
  if (!Array.isArray(value) || value.length === 0 || !value.every((s) => (FINISHED as readonly unknown[]).includes(s))) {
    throw new JobError(
      `prune: statuses must be a non-empty list of ${FINISHED.map((s) => JSON.stringify(s)).join(", ")}, got ${Array.isArray(value) ? JSON.stringify(value) : describe(value)}`,
      "statuses",
    );
  }
  return [...new Set(value as string[])];
}

/** Deletes finished jobs (done, failed, cancelled) that ended more than `olderThan` seconds ago. */
export async function prune(options: PruneOptions): Promise<number> {
  checkOptions(options, PRUNE_OPTION_KEYS, "prune");
  const olderThan = checkSeconds(options.olderThan, "olderThan");
  const statuses = checkStatuses(options.statuses);
  const db = resolveDb(options.db);
  const placeholders = statuses.map((_, i) => `$${i + 2}`).join(", ");
  const { rowCount } = await db.executor.query(`DELETE FROM ${db.table} WHERE status IN (${placeholders}) AND finished_at < ${db.sql.nowPlus("$1", "-")}`, [
    olderThan,
    ...statuses,
  ]);
  return rowCount;
}
