import { cronSlots } from "./cron-slots.js";
import type { JobsDatabase } from "./db/database.js";
import { enqueue } from "./enqueue.js";
import { silentLogger, type Logger } from "./logger.js";
import { SCHEDULE_COLUMNS, databaseNow, decodeSchedule, flagParam, slotKey, timestampParam, type ScheduleRow } from "./schedule-rows.js";

/**
 * A slot found due at most this late is on time, not missed: the catch-up policy never drops
 * it. Wider than any sane poll interval, so a slow tick is not an outage.
 */
export const ON_TIME_MS = 60_000;
/** Past this many due slots, the walk restarts a day before now (a per-second cron after a week away). */
const LONG_WALK = 10_000;
const DAY_MS = 86_400_000;

export interface SchedulerTickOptions {
  /** The scheduler's notion of now. Tests drive it; in production the database clock decides. */
  now?: Date;
  /** Slots due at most this late are on time (see ON_TIME_MS); a worker passes twice its poll interval when that is more. */
  onTimeMs?: number;
  logger?: Logger;
}

/**
 * One pass of the scheduler: for every due schedule, enqueues its due slots by its catch-up
 * policy and moves it to its next slot. Any number of processes may run this at once: a slot's
 * job has the idempotency key `schedule:<name>@<slot>`, so the database takes one per slot, and
 * next_run_at moves by compare-and-set. Returns how many slots it handed to enqueue.
 */
export async function runDueSchedules(db: JobsDatabase, options: SchedulerTickOptions = {}): Promise<number> {
  const now = options.now ?? (await databaseNow(db));
  const logger = options.logger ?? silentLogger;
  const { rows } = await db.executor.query<Record<string, unknown>>(
    `SELECT ${SCHEDULE_COLUMNS} FROM ${db.schedulesTable} WHERE paused = $1 AND next_run_at <= $2 ORDER BY next_run_at`,
    [flagParam(db, false), timestampParam(db, now)],
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

/** The slots of a schedule to enqueue now, oldest first, and the latest slot due. */
export function slotsToRun(row: ScheduleRow, now: Date, onTimeMs: number): { run: Date[]; latest: Date | null; next: Date | null } {
  const slots = cronSlots(row.cron, row.timezone);
  const keep = row.catchUp === "all" ? row.catchUpLimit : 1;
  const onTimeFrom = now.getTime() - onTimeMs;
  const missed: Date[] = [];
  const onTime: Date[] = [];
  let slot: Date | null = row.nextRunAt;
  let walked = 0;
  while (slot !== null && slot.getTime() <= now.getTime()) {
    if (slot.getTime() >= onTimeFrom) onTime.push(slot);
    else {
      missed.push(slot);
      if (missed.length > keep) missed.shift();
    }
    if (++walked === LONG_WALK && slot.getTime() < now.getTime() - DAY_MS) slot = new Date(now.getTime() - DAY_MS);
    slot = slots.nextAfter(slot);
  }
  const latest = onTime.at(-1) ?? missed.at(-1) ?? null;
  const caughtUp = row.catchUp === "none" ? [] : missed;
  return { run: [...caughtUp, ...onTime], latest, next: slot };
}

async function runSchedule(db: JobsDatabase, row: ScheduleRow, now: Date, onTimeMs: number, logger: Logger): Promise<number> {
  const { run, latest, next } = slotsToRun(row, now, onTimeMs);
  for (const slot of run) {
    await enqueue(row.task, row.payload as never, {
      db,
      queue: row.queue,
      ...(row.tenant === null ? {} : { tenant: row.tenant }),
      idempotencyKey: slotKey(row.name, slot),
      // One run pending or running at a time: the queue's dedup key holds the others back.
      ...(row.overlap === "skip" ? { dedupKey: `schedule:${row.name}` } : {}),
    });
  }
  // Compare-and-set: a process that read the row before another moved it changes nothing.
  await db.executor.query(
    `UPDATE ${db.schedulesTable} SET next_run_at = $2, last_run_at = $3, updated_at = ${db.sql.now} WHERE name = $1 AND next_run_at = $4`,
    [row.name, timestampParam(db, next), timestampParam(db, latest), timestampParam(db, row.nextRunAt)],
  );
  if (run.length > 0) logger.debug({ schedule: row.name, slots: run.map((s) => s.toISOString()) }, "schedule: runs enqueued");
  return run.length;
}
