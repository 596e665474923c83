import { cronSlots, type CronSlots } from "./cron-slots.js";
import { JobsDatabase } from "../core/database.js";
import { isMissingTable } from "../flow/flow-overview.js";
import { enqueue } from "../enqueue/enqueue.js";
import { silentLogger, type Logger } from "../base/logger.js";
import type { PerDialect } from "../core/sql.js";
import { SCHEDULE_COLUMNS, databaseNow, decodeSchedule, scheduledRun, slotKey, timestampParam, type ScheduleRow } from "./schedule-rows.js";

/**
 * A slot found due at most this late is on time, not missed: the catch-up policy never drops
 * it. Wider than any sane poll interval, so a slow tick is not an outage.
 */
export const ON_TIME_MS = 60_000;
/** Past this many due slots, the walk restarts closer to now (see slotsToRun). */
const LONG_WALK = 10_000;
const HOUR_MS = 3_600_000;
const RESTART_WINDOWS = [HOUR_MS, 24 * HOUR_MS, 32 * 24 * HOUR_MS, 400 * 24 * HOUR_MS];

/** As jobs_schedules_due is defined: the predicate of the partial index, or the first column of MariaDB's. */
const NOT_PAUSED: PerDialect<string> = { postgres: "NOT paused", sqlite: "NOT paused", mysql: "paused = FALSE" };

export interface SchedulerTickOptions {
  /** The scheduler's notion of now. Tests drive it; in production the database clock decides. */
  now?: Date;
  /** Slots due at most this late are on time (see ON_TIME_MS); a worker passes twice its poll interval when that is more. */
  onTimeMs?: number;
  logger?: Logger;
}

/**
 * One pass of the scheduler: for every due schedule, enqueues its due slots by its catch-up
 * policy and moves it to its next slot. Any number of processes may run this at once: next_run_at
 * moves by compare-and-set in the transaction that enqueues the slots, and a slot's job has the
 * idempotency key `schedule:<name>@<slot>`, unique in the jobs table. Returns how many slots it
 * enqueued.
 */
export async function runDueSchedules(db: JobsDatabase, options: SchedulerTickOptions = {}): Promise<number> {
  const now = options.now ?? (await databaseNow(db));
  const logger = options.logger ?? silentLogger;
  const { rows } = await db.executor.query<Record<string, unknown>>(
    `SELECT ${SCHEDULE_COLUMNS} FROM ${db.schedulesTable} WHERE ${NOT_PAUSED[db.dialect]} AND next_run_at <= $1 ORDER BY next_run_at`,
    [timestampParam(db, now)],
  );
  let handed = 0;
  for (const raw of rows) {
    const row = decodeSchedule(db, raw);
    try {
      handed += await runSchedule(db, row, now, options.onTimeMs ?? ON_TIME_MS, logger);
    } catch (error) {
      // One schedule's failure (a dropped connection, a bad row) must not hold the others back;
      // its next_run_at has not moved, so the next pass tries its slots again.
      logger.error({ schedule: row.name, err: error }, "schedule: could not enqueue its due runs");
    }
  }
  return handed;
}

interface Walk {
  missed: Date[];
  onTime: Date[];
  /** The first slot after now. */
  next: Date | null;
  /** False when the walk stopped at `maxSteps` before reaching now. */
  finished: boolean;
}

/** The due slots from `first` to now: all the on-time ones, the last `keep` missed ones. */
function walk(slots: CronSlots, first: Date | null, now: number, onTimeFrom: number, keep: number, maxSteps: number): Walk {
  const result: Walk = { missed: [], onTime: [], next: first, finished: true };
  for (let steps = 0; result.next !== null && result.next.getTime() <= now; steps++) {
    if (steps === maxSteps) return { ...result, finished: false };
    if (result.next.getTime() >= onTimeFrom) result.onTime.push(result.next);
    else if (result.missed.push(result.next) > keep) result.missed.shift();
    result.next = slots.nextAfter(result.next);
  }
  return result;
}

/** The slots of a schedule to enqueue now, oldest first, the latest slot due, and the next one. */
export function slotsToRun(row: ScheduleRow, now: Date, onTimeMs: number): { run: Date[]; latest: Date | null; next: Date | null } {
  const slots = cronSlots(row.cron, row.timezone);
  const keep = row.catchUp === "all" ? row.catchUpLimit : 1;
  const at = now.getTime();
  const onTimeFrom = at - onTimeMs;
  let found = walk(slots, row.nextRunAt, at, onTimeFrom, keep, LONG_WALK);
  // A long outage of a busy expression (a week of an every-second cron): only the last slots
  // count, so walk the last hour, day, month or year instead, the first that holds enough.
  for (const window of RESTART_WINDOWS) {
    if (found.finished) break;
    // Never before the schedule's own next slot: the slots before it were handled.
    const from = Math.max(row.nextRunAt!.getTime(), Math.min(at - window, onTimeFrom));
    found = walk(slots, slots.nextAfter(new Date(from - 1)), at, onTimeFrom, keep, Infinity);
    if (found.missed.length >= keep) break;
  }
  const latest = found.onTime.at(-1) ?? found.missed.at(-1) ?? null;
  return { run: [...(row.catchUp === "none" ? [] : found.missed), ...found.onTime], latest, next: found.next };
}

export async function runSchedule(db: JobsDatabase, row: ScheduleRow, now: Date, onTimeMs: number, logger: Logger): Promise<number> {
  const { run, latest, next } = slotsToRun(row, now, onTimeMs);
  // Move the schedule and enqueue its slots in one transaction, the move first by compare-and-set:
  // a pass that read the row before another moved it waits on the row, then changes nothing, so
  // even a pass stalled past the pruning of a slot's job cannot enqueue that slot again. The
  // slot key's unique index stays the guarantee beneath. Paused (or removed) meanwhile: nothing,
  // and a pause that commits after this cancels what this enqueued.
  const moved = await db.executor.transaction(async (tx) => {
    const { rowCount } = await tx.query(
      `UPDATE ${db.schedulesTable} SET next_run_at = $2, last_run_at = $3, updated_at = ${db.sql.now} WHERE name = $1 AND next_run_at = $4 AND ${NOT_PAUSED[db.dialect]}`,
      [row.name, timestampParam(db, next), timestampParam(db, latest), timestampParam(db, row.nextRunAt)],
    );
    if (rowCount === 0) return false;
    const inTransaction = new JobsDatabase(tx, db.settings);
    for (const slot of run) {
      await enqueue(
        row.task,
        row.payload as never,
        scheduledRun({
          db: inTransaction,
          queue: row.queue,
          ...(row.tenant === null ? {} : { tenant: row.tenant }),
          idempotencyKey: slotKey(row.name, slot),
          // One run pending or running at a time: the queue's dedup key holds the others back.
          ...(row.overlap === "skip" ? { dedupKey: `schedule:${row.name}` } : {}),
        }),
      );
    }
    return true;
  });
  if (!moved || run.length === 0) return 0;
  // The transaction's executor wakes no one; where the server cannot push, this process's workers hear it here.
  db.executor.notify?.(db.channel, row.queue);
  logger.debug({ schedule: row.name, slots: run.map((s) => s.toISOString()) }, "schedule: runs enqueued");
  return run.length;
}

/**
 * A worker's scheduler pass, run every poll interval (any number of workers may: each slot runs
 * once). On a schema without the schedules table (migration 5 not applied yet) it says so once
 * and stands by, instead of failing every poll.
 */
export function schedulerPass(db: JobsDatabase, pollMs: number, logger: Logger): () => Promise<void> {
  let missing = false;
  return async () => {
    if (missing) return;
    try {
      await runDueSchedules(db, { logger, onTimeMs: Math.max(ON_TIME_MS, 2 * pollMs) });
    } catch (error) {
      if (!isMissingTable(error)) throw error;
      missing = true;
      logger.warn({}, "schedules are not run: the schema has no schedules table yet (run forge-jobs migrate, then restart the worker)");
    }
  };
}
