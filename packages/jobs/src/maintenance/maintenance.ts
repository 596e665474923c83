import { prune, pruneHistory } from "./admin.js";
import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { JobError } from "../base/errors.js";
import { checkPartitionsDialect } from "./history.js";
import type { Logger } from "../base/logger.js";
import { type DbLike } from "../core/options.js";
import { checkOptions } from "../core/option-keys.js";
import { reclaim } from "./reclaim.js";
import { schedule, unschedule, type ScheduleChange } from "../schedules/schedules.js";
import type { JobHandler } from "../base/types.js";
import { MAX_PRUNE_BATCH } from "./prune-batch.js";
import { checkInteger, checkKnownOptions, checkSeconds, describe } from "../base/validate.js";

/** The tasks (and schedule names) of the queue's own maintenance; every worker handles them. */
export const PRUNE_TASK = "forge-jobs:prune";
export const RECLAIM_TASK = "forge-jobs:reclaim";
export const PRUNE_HISTORY_TASK = "forge-jobs:prune-history";

export interface MaintenanceOptions {
  /**
   * Delete finished jobs older than `olderThan` seconds, on `cron` (default "@hourly"), in
   * batches of `batchSize` rows (see `prune`). Omitted or false: no pruning schedule.
   */
  prune?: { olderThan: number; statuses?: ("done" | "failed" | "cancelled")[]; batchSize?: number; into?: "history"; cron?: string } | false;
  /**
   * PostgreSQL: drop the history table's days that ended more than `olderThan` seconds ago, on
   * `cron` (default "@daily"), as `pruneHistory` does. Omitted or false: no such schedule.
   */
  pruneHistory?: { olderThan: number; cron?: string } | false;
  /** Take back jobs of lost workers on `cron` (default every minute), as `reclaim({ lease })` does. Omitted or false: none (workers sweep on their own). */
  reclaim?: { lease?: number; cron?: string } | false;
  /** The queue the maintenance runs go to: a worker must serve it. Default "default". */
  queue?: string;
  db?: DbLike;
  logger?: Logger;
}

const KEYS = ["prune", "pruneHistory", "reclaim", "queue", "db", "logger"];

/**
 * Declares the queue's own maintenance as schedules (idempotent, like `schedule`), so no system
 * cron is needed: `forge-jobs:prune`, `forge-jobs:prune-history` and `forge-jobs:reclaim`, run by any worker serving
 * `queue`. One left out (or false) is removed.
 */
export async function scheduleMaintenance(options: MaintenanceOptions): Promise<Record<string, ScheduleChange | "removed" | "absent">> {
  checkOptions(options, KEYS, "scheduleMaintenance");
  const db = resolveDb(options.db, options.logger);
  const common = { queue: options.queue ?? "default", db, ...(options.logger ? { logger: options.logger } : {}) };
  const p = options.prune;
  const r = options.reclaim;
  const h = options.pruneHistory;
  // All checked before any is written: a bad setting writes nothing.
  if (p) {
    checkPart(p, ["olderThan", "statuses", "batchSize", "into", "cron"], "prune");
    checkSeconds(p.olderThan, "prune.olderThan");
    if (p.batchSize !== undefined) checkInteger(p.batchSize, "prune.batchSize", 1, MAX_PRUNE_BATCH);
    if (p.into !== undefined) {
      if (p.into !== "history") throw new JobError(`scheduleMaintenance: prune.into must be "history" or left out, got ${describe(p.into)}`, "prune.into");
    }
  }
  if (h) {
    checkPart(h, ["olderThan", "cron"], "pruneHistory");
    checkSeconds(h.olderThan, "pruneHistory.olderThan");
    checkPartitionsDialect(db, "scheduleMaintenance", "pruneHistory");
  }
  if (r) {
    checkPart(r, ["lease", "cron"], "reclaim");
    if (r.lease !== undefined) checkSeconds(r.lease, "reclaim.lease");
  }
  const result: Record<string, ScheduleChange | "removed" | "absent"> = {};
  result[PRUNE_TASK] = p
    ? await schedule(PRUNE_TASK, p.cron ?? "@hourly", {
        task: PRUNE_TASK,
        payload: {
          olderThan: p.olderThan,
          ...(p.statuses ? { statuses: p.statuses } : {}),
          ...(p.batchSize === undefined ? {} : { batchSize: p.batchSize }),
          ...(p.into ? { into: p.into } : {}),
        },
        ...common,
      })
    : (await unschedule(PRUNE_TASK, { db }))
      ? "removed"
      : "absent";
  // PostgreSQL's alone: said only when declared or removed, so the other backends' answers keep their two entries.
  if (h)
    result[PRUNE_HISTORY_TASK] = await schedule(PRUNE_HISTORY_TASK, h.cron ?? "@daily", {
      task: PRUNE_HISTORY_TASK,
      payload: { olderThan: h.olderThan },
      ...common,
    });
  else if (await unschedule(PRUNE_HISTORY_TASK, { db })) result[PRUNE_HISTORY_TASK] = "removed";
  result[RECLAIM_TASK] = r
    ? await schedule(RECLAIM_TASK, r.cron ?? "* * * * *", { task: RECLAIM_TASK, payload: r.lease === undefined ? {} : { lease: r.lease }, ...common })
    : (await unschedule(RECLAIM_TASK, { db }))
      ? "removed"
      : "absent";
  return result;
}

function checkPart(value: unknown, keys: string[], field: string): void {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new JobError(`scheduleMaintenance: ${field} must be an object or false, got ${describe(value)}`, field);
  checkKnownOptions(value, keys, `scheduleMaintenance: ${field}`);
}

/** The built-in handler of a maintenance task, bound to the worker's database; undefined for any other task. */
export function maintenanceHandler(task: string, db: JobsDatabase): JobHandler | undefined {
  if (task === PRUNE_TASK) {
    return async (payload) => {
      const { olderThan, statuses, batchSize, into } = payload as {
        olderThan: number;
        statuses?: ("done" | "failed" | "cancelled")[];
        batchSize?: number;
        into?: "history";
      };
      const n = await prune({ olderThan, ...(statuses ? { statuses } : {}), ...(batchSize === undefined ? {} : { batchSize }), ...(into ? { into } : {}), db });
      return into ? { moved: n } : { deleted: n };
    };
  }
  if (task === PRUNE_HISTORY_TASK) {
    return async (payload) => ({ dropped: await pruneHistory({ olderThan: (payload as { olderThan: number }).olderThan, db }) });
  }
  if (task === RECLAIM_TASK) {
    return async (payload) => {
      const { lease } = (payload ?? {}) as { lease?: number };
      return { reclaimed: (await reclaim({ ...(lease === undefined ? {} : { lease }), db })).length };
    };
  }
  return undefined;
}

/** Whether a task is one of the queue's own (for `doctor`: every worker handles them). */
export function isMaintenanceTask(task: string): boolean {
  return task === PRUNE_TASK || task === RECLAIM_TASK || task === PRUNE_HISTORY_TASK;
}
