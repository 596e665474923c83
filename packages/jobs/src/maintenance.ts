import { prune } from "./admin.js";
import { resolveDb } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { JobError } from "./errors.js";
import type { Logger } from "./logger.js";
import { checkOptions, type DbLike } from "./options.js";
import { reclaim } from "./reclaim.js";
import { schedule, unschedule, type ScheduleChange } from "./schedules.js";
import type { JobHandler } from "./types.js";
import { checkKnownOptions, checkSeconds, describe } from "./validate.js";

/** The tasks (and schedule names) of the queue's own maintenance; every worker handles them. */
export const PRUNE_TASK = "forge-jobs:prune";
export const RECLAIM_TASK = "forge-jobs:reclaim";

export interface MaintenanceOptions {
  /** Delete finished jobs older than `olderThan` seconds, on `cron` (default "@hourly"). Omitted or false: no pruning schedule. */
  prune?: { olderThan: number; statuses?: ("done" | "failed" | "cancelled")[]; cron?: string } | false;
  /** Take back jobs of lost workers on `cron` (default every minute), as `reclaim({ lease })` does. Omitted or false: none (workers sweep on their own). */
  reclaim?: { lease?: number; cron?: string } | false;
  /** The queue the maintenance runs go to: a worker must serve it. Default "default". */
  queue?: string;
  db?: DbLike;
  logger?: Logger;
}

const KEYS = ["prune", "reclaim", "queue", "db", "logger"];

/**
 * Declares the queue's own maintenance as schedules (idempotent, like `schedule`), so no system
 * cron is needed: `forge-jobs:prune` and `forge-jobs:reclaim`, run by any worker serving
 * `queue`. One left out (or false) is removed.
 */
export async function scheduleMaintenance(options: MaintenanceOptions): Promise<Record<string, ScheduleChange | "removed" | "absent">> {
  checkOptions(options, KEYS, "scheduleMaintenance");
  const db = resolveDb(options.db, options.logger);
  const common = { queue: options.queue ?? "default", db, ...(options.logger ? { logger: options.logger } : {}) };
  const p = options.prune;
  const r = options.reclaim;
  // Both checked before either is written: a bad setting writes nothing.
  if (p) {
    checkPart(p, ["olderThan", "statuses", "cron"], "prune");
    checkSeconds(p.olderThan, "prune.olderThan");
  }
  if (r) {
    checkPart(r, ["lease", "cron"], "reclaim");
    if (r.lease !== undefined) checkSeconds(r.lease, "reclaim.lease");
  }
  const result: Record<string, ScheduleChange | "removed" | "absent"> = {};
  result[PRUNE_TASK] = p
    ? await schedule(PRUNE_TASK, p.cron ?? "@hourly", {
        task: PRUNE_TASK,
        payload: { olderThan: p.olderThan, ...(p.statuses ? { statuses: p.statuses } : {}) },
        ...common,
      })
    : (await unschedule(PRUNE_TASK, { db }))
      ? "removed"
      : "absent";
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
      const { olderThan, statuses } = payload as { olderThan: number; statuses?: ("done" | "failed" | "cancelled")[] };
      return { deleted: await prune({ olderThan, ...(statuses ? { statuses } : {}), db }) };
    };
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
  return task === PRUNE_TASK || task === RECLAIM_TASK;
}
