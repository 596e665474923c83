import { resolveDb } from "../core/connect.js";
import { pruneDebounceKeys } from "../enqueue/debounce.js";
import { pruneEvents } from "../events/event-prune.js";
import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { JobError } from "../base/errors.js";
import { pruneFlowEdges } from "../dependencies/flow-prune.js";
import { settleEndedIds } from "../dependencies/flow-release.js";
import { cancelHoldingFailed } from "../dependencies/release-held.js";
import { whileEnding } from "../run/ended.js";
import { pruneAttempts, recordAttempts } from "../run/attempts.js";
import { type AdminOptions, type DatabaseOptions, type PruneHistoryOptions, type PruneOptions } from "../core/options.js";
import { ADMIN_OPTION_KEYS, DATABASE_OPTION_KEYS, PRUNE_HISTORY_OPTION_KEYS, PRUNE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { checkPartitionsDialect, dropPartitions, listPartitions, moveBatch, restoreEnded, type HistoryPartition } from "./history.js";
import { uncountLive } from "./uncount.js";
import { isUniqueViolation } from "../core/sql-errors.js";
import { DEFAULT_PRUNE_BATCH, FINISHED, MAX_PRUNE_BATCH, pruneBatch, pruneLegacyBatch, type FinishedStatus } from "./prune-batch.js";
import { checkInteger, checkJobId, checkSeconds, checkTenant, describe } from "../base/validate.js";

export type { AdminOptions, PruneHistoryOptions, PruneOptions } from "../core/options.js";
export type { HistoryPartition } from "./history.js";

/** Checked before anything runs: a typo'd option (`tenantId`) must not act unscoped. */
function checkAdminCall(id: unknown, options: AdminOptions, where: string): { db: JobsDatabase; tenant: string | null } {
  checkOptions(options, ADMIN_OPTION_KEYS, where);
  checkJobId(id);
  const tenant = checkTenant(options.tenant, "tenant", "any tenant's job");
  return { db: resolveDb(options.db), tenant };
}

/**
 * Cancels a pending, running or waiting job. A running handler sees its `ctx.signal` fire at its
 * worker's next lease extension, and its completion is refused (fenced). A failed job that
 * holds waiting jobs (`onDependencyFailure: "hold"`, a `sequence`) is marked cancelled, which
 * releases them; any other ended job is left as it is (false).
 */
export async function cancelJob(id: number, options: AdminOptions = {}): Promise<boolean> {
  const { db, tenant } = checkAdminCall(id, options, "cancelJob");
  // A waiting job can be cancelled too; its dependents and batch learn of it in the same transaction.
  return whileEnding(db, () =>
    db.executor.transaction(async (tx) => {
      const { rowCount } = await tx.query(
        `UPDATE ${db.table} SET status = 'cancelled', claim_token = NULL, locked_until = NULL, finished_at = ${db.sql.now}, updated_at = ${db.sql.now}
         WHERE id = $1 AND status IN ('pending', 'running', 'waiting')${tenant === null ? "" : " AND tenant = $2"}`,
        tenant === null ? [id] : [id, tenant],
      );
      if (rowCount > 0) await settleEndedIds(db, tx, [id], "cancelled");
      return rowCount > 0 || (await cancelHoldingFailed(db, tx, id, tenant));
    }),
  );
}

/**
 * Puts a failed or cancelled job back in its queue now, with one more attempt allowed: from the
 * history table back into the live table, or (a legacy row an older version left in the live
 * table) where it is, out of the counts. A job whose dedup key another pending or running job
 * holds meanwhile cannot be: a JobError says so.
 */
export async function retryJob(id: number, options: AdminOptions = {}): Promise<boolean> {
  const { db, tenant } = checkAdminCall(id, options, "retryJob");
  const which = `id = $1 AND status IN ('failed', 'cancelled')${tenant === null ? "" : " AND tenant = $2"}`;
  const params = tenant === null ? [id] : [id, tenant];
  const retry = (tx: Executor) =>
    tx.query(
      `UPDATE ${db.table} SET status = 'pending', due = ${db.sql.boolean(true)}, run_at = ${db.sql.now}, finished_at = NULL, updated_at = ${db.sql.now},
         max_attempts = CASE WHEN max_attempts > attempts THEN max_attempts ELSE attempts + 1 END
       WHERE ${which}`,
      params,
    );
  try {
    return await db.executor.transaction(async (tx) => {
      const legacy = await tx.query(`SELECT id FROM ${db.table} WHERE ${which}${db.dialect === "sqlite" ? "" : " FOR UPDATE"}`, params);
      if (legacy.rows.length > 0) await uncountLive(db, tx, [id]);
      else if (!(await restoreEnded(db, tx, id, tenant))) return false;
      // Its last attempt becomes an earlier one: kept in its attempts history, with when it ended.
      await recordAttempts(db, tx, [id], `COALESCE(finished_at, ${db.sql.now})`);
      return (await retry(tx)).rowCount > 0;
    });
  } catch (error) {
    // Back to pending makes the job an active holder of its dedup key again: the only unique
    // index this UPDATE can run into.
    if (!isUniqueViolation(error, db.dialect)) throw error;
    throw await dedupKeyHeld(db, id);
  }
}

async function dedupKeyHeld(db: JobsDatabase, id: number): Promise<JobError> {
  // Inside a caller's PostgreSQL transaction the violation aborted it, and this read fails too.
  // The job is where it was before the retry: in history, or a legacy row of the live table.
  const holder = await db.executor
    .query<{ dedup_key: string; id: number | string }>(
      `SELECT j.dedup_key, h.id FROM (SELECT dedup_key FROM ${db.table} WHERE id = $1 UNION ALL SELECT dedup_key FROM ${db.historyTable} WHERE id = $1) j
       JOIN ${db.table} h ON h.dedup_key = j.dedup_key AND h.status IN ('pending', 'running')`,
      [id],
    )
    .then((r) => r.rows[0])
    .catch(() => undefined);
  const held = holder ? `its dedupKey ${JSON.stringify(holder.dedup_key)} is held by job ${Number(holder.id)}` : "its dedupKey is held by another job";
  return new JobError(`retryJob: job ${id} cannot be retried: ${held}, pending or running; cancel that job or wait until it ends, then retry`, "id");
}

/** A non-empty list of finished states: anything else would delete nothing, or be an SQL error (`IN ()`). */
function checkStatuses(value: unknown): readonly FinishedStatus[] {
  if (value === undefined) return FINISHED;
  if (!Array.isArray(value) || value.length === 0 || !value.every((s) => (FINISHED as readonly unknown[]).includes(s))) {
    throw new JobError(
      `prune: statuses must be a non-empty list of ${FINISHED.map((s) => JSON.stringify(s)).join(", ")}, got ${Array.isArray(value) ? JSON.stringify(value) : describe(value)}`,
      "statuses",
    );
  }
  return [...new Set(value as FinishedStatus[])];
}

function checkInto(value: unknown): "history" | undefined {
  if (value === undefined) return undefined;
  if (value !== "history") throw new JobError(`prune: into must be "history" or left out (to delete), got ${describe(value)}`, "into");
  return value;
}

/**
 * Deletes ended jobs (done, failed, cancelled, or `statuses`) that ended more than `olderThan`
 * seconds ago, oldest first, `batchSize` rows per statement: each batch is its own short
 * transaction that locks only the ended rows it deletes, so workers claim and complete
 * throughout a prune of millions. Returns how many were deleted. The history table's jobs, and
 * first the legacy ended rows an older version left in the live table (taken out of the counts
 * as they go). With `into: "history"` those legacy rows alone are moved to the history table
 * instead, the same way (what the online upgrade does).
 */
export async function prune(options: PruneOptions): Promise<number> {
  checkOptions(options, PRUNE_OPTION_KEYS, "prune");
  const olderThan = checkSeconds(options.olderThan, "olderThan");
  const statuses = checkStatuses(options.statuses);
  const batch = options.batchSize === undefined ? DEFAULT_PRUNE_BATCH : checkInteger(options.batchSize, "batchSize", 1, MAX_PRUNE_BATCH);
  const into = checkInto(options.into);
  const db = resolveDb(options.db);
  // Before the ended jobs go: a key is known to be done with while its job is in history.
  if (into === undefined) await pruneDebounceKeys(db);
  let deleted = 0;
  for (const step of into === "history" ? [moveBatch] : [pruneLegacyBatch, pruneBatch]) {
    for (;;) {
      const n = await step(db, olderThan, statuses, batch);
      deleted += n;
      if (n < batch) break;
      // A turn of the event loop between batches: SQLite answers synchronously, and a prune of
      // millions in a worker's process would otherwise hold its timers (lease extensions) until done.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  // The edges of pruned jobs whose dependents had all ended.
  if (deleted > 0 && into === undefined) await pruneFlowEdges(db);
  if (deleted > 0 && into === undefined) await pruneAttempts(db);
  if (into === undefined) await pruneEvents(db, olderThan);
  return deleted;
}

/**
 * Drops the history table's days (partitions, PostgreSQL) that ended more than `olderThan`
 * seconds ago: retention without deleting a row. Returns the days dropped (`YYYY-MM-DD`, UTC).
 */
export async function pruneHistory(options: PruneHistoryOptions): Promise<string[]> {
  checkOptions(options, PRUNE_HISTORY_OPTION_KEYS, "pruneHistory");
  const olderThan = checkSeconds(options.olderThan, "olderThan");
  const db = resolveDb(options.db);
  checkPartitionsDialect(db, "pruneHistory", "pruneHistory");
  await pruneDebounceKeys(db);
  const dropped = await dropPartitions(db, olderThan);
  if (dropped.length > 0) await pruneAttempts(db);
  await pruneEvents(db, olderThan);
  return dropped;
}

/** The history table's days (partitions, PostgreSQL), oldest first, with their estimated rows and size. */
export async function historyPartitions(options: DatabaseOptions = {}): Promise<HistoryPartition[]> {
  checkOptions(options, DATABASE_OPTION_KEYS, "historyPartitions");
  const db = resolveDb(options.db).forReading();
  checkPartitionsDialect(db, "historyPartitions", "historyPartitions");
  return listPartitions(db);
}
