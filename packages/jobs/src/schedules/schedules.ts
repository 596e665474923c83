import { resolveDb } from "../core/connect.js";
import { settleEndedIds } from "../dependencies/flow-release.js";
import { whileEnding } from "../run/ended.js";
import { cronSlots } from "./cron-slots.js";
import type { JobsDatabase } from "../core/database.js";
import { enqueue } from "../enqueue/enqueue.js";
import { JobError } from "../base/errors.js";
import { silentLogger, type Logger } from "../base/logger.js";
import { type DatabaseOptions } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { toJsonText } from "../base/payload.js";
import {
  SCHEDULE_COLUMNS,
  databaseNow,
  decodeSchedule,
  definitionText,
  flagParam,
  scheduledRun,
  slotKey,
  slotKeyPattern,
  timestampParam,
  type ScheduleDefinition,
  type ScheduleRow,
} from "./schedule-rows.js";
import {
  DECLARATION_KEYS,
  SCHEDULE_OPTION_KEYS,
  checkDefinition,
  checkPayloadSize,
  checkScheduleName,
  type ScheduleChange,
  type ScheduleDeclaration,
  type ScheduleOptions,
  type ScheduleStatus,
  type SyncSchedulesOptions,
} from "./schedule-definition.js";
import { checkKnownOptions, describe } from "../base/validate.js";

export {
  DEFAULT_CATCH_UP_LIMIT,
  type ScheduleChange,
  type ScheduleDeclaration,
  type ScheduleOptions,
  type ScheduleStatus,
  type SyncSchedulesOptions,
} from "./schedule-definition.js";

/**
 * Creates or updates a schedule. Idempotent: the same definition again changes nothing, a
 * changed one is stored (and logged) and takes effect from the next slot. A paused schedule
 * stays paused. Schedules declared here are never removed by `syncSchedules`.
 */
export async function schedule(name: string, cron: string, options: ScheduleOptions): Promise<ScheduleChange> {
  checkOptions(options, SCHEDULE_OPTION_KEYS, "schedule");
  const checkedName = checkScheduleName(name, "schedule");
  const definition = checkDefinition(cron, options, "schedule");
  const db = resolveDb(options.db, options.logger);
  checkPayloadSize(db, definition, "schedule");
  return declare(db, checkedName, definition, false, options.logger ?? silentLogger);
}

/**
 * Declares every schedule given (as `schedule` does) and removes every other schedule that an
 * earlier `syncSchedules` declared; schedules made with `schedule()` are left alone.
 */
export async function syncSchedules(
  declarations: readonly ScheduleDeclaration[],
  options: SyncSchedulesOptions = {},
): Promise<Record<string, ScheduleChange | "removed">> {
  checkOptions(options, [...DATABASE_OPTION_KEYS, "logger"], "syncSchedules");
  if (!Array.isArray(declarations)) throw new JobError("syncSchedules: give an array of { name, cron, task, ... }", "definitions");
  const checked = declarations.map((d: unknown, i) => {
    const where = `syncSchedules: definitions[${i}]`;
    if (typeof d !== "object" || d === null) throw new JobError(`${where} must be an object { name, cron, task, ... }, got ${describe(d)}`, "definitions");
    checkKnownOptions(d, DECLARATION_KEYS, where);
    const { name, cron, ...rest } = d as ScheduleDeclaration;
    return { name: checkScheduleName(name, where), definition: checkDefinition(cron, rest, where) };
  });
  const names = new Set<string>();
  for (const { name } of checked) {
    if (names.has(name)) throw new JobError(`syncSchedules: schedule ${JSON.stringify(name)} is declared twice`, "name");
    names.add(name);
  }
  const db = resolveDb(options.db, options.logger);
  checked.forEach(({ definition }, i) => checkPayloadSize(db, definition, `syncSchedules: definitions[${i}]`));
  const logger = options.logger ?? silentLogger;
  const changes: Record<string, ScheduleChange | "removed"> = {};
  for (const { name, definition } of checked) changes[name] = await declare(db, name, definition, true, logger);
  const { rows } = await db.executor.query<{ name: string }>(`SELECT name FROM ${db.schedulesTable} WHERE from_code = $1`, [flagParam(db, true)]);
  for (const { name } of rows) {
    if (names.has(name)) continue;
    if (await removeSchedule(db, name)) {
      changes[name] = "removed";
      logger.info({ schedule: name }, "schedule removed: no longer declared");
    }
  }
  return changes;
}

export async function readSchedule(db: JobsDatabase, name: string): Promise<ScheduleRow | null> {
  const { rows } = await db.executor.query<Record<string, unknown>>(`SELECT ${SCHEDULE_COLUMNS} FROM ${db.schedulesTable} WHERE name = $1`, [name]);
  return rows[0] ? decodeSchedule(db, rows[0]) : null;
}

async function declare(db: JobsDatabase, name: string, d: ScheduleDefinition, fromCode: boolean, logger: Logger): Promise<ScheduleChange> {
  const text = definitionText(d);
  const now = await databaseNow(db);
  const next = timestampParam(db, cronSlots(d.cron, d.timezone).nextAfter(now));
  const values = [
    d.cron,
    d.timezone,
    d.task,
    toJsonText(d.payload, "payload"),
    d.queue,
    d.tenant,
    d.catchUp,
    d.catchUpLimit,
    d.overlap,
    flagParam(db, fromCode),
    text,
  ];
  for (let attempt = 0; ; attempt++) {
    const existing = await readSchedule(db, name);
    if (existing === null) {
      // Two processes declaring at once: one row, and the other compares its definition with it.
      const [insert, conflict] = db.dialect === "mysql" ? ["INSERT IGNORE", ""] : ["INSERT", "ON CONFLICT (name) DO NOTHING"];
      const inserted = await db.executor.query(
        `${insert} INTO ${db.schedulesTable} (name, cron, timezone, task, payload, queue, tenant, catch_up, catch_up_limit, overlap, from_code, definition, next_run_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ${conflict}`,
        [name, ...values, next],
      );
      if (inserted.rowCount > 0) {
        logger.info({ schedule: name, cron: d.cron, timezone: d.timezone, task: d.task }, "schedule created");
        return "created";
      }
      if (attempt < 2) continue; // another process created it meanwhile: compare with theirs
    } else if (existing.definition === text && existing.fromCode === fromCode) {
      return "unchanged";
    }
    // A new cron or zone starts from the next slot of the new one; anything else keeps its slots.
    const moved = existing === null || existing.cron !== d.cron || existing.timezone !== d.timezone;
    await db.executor.query(
      `UPDATE ${db.schedulesTable} SET cron = $2, timezone = $3, task = $4, payload = $5, queue = $6, tenant = $7, catch_up = $8, catch_up_limit = $9,
         overlap = $10, from_code = $11, definition = $12${moved ? ", next_run_at = $13" : ""}, updated_at = ${db.sql.now} WHERE name = $1`,
      moved ? [name, ...values, next] : [name, ...values],
    );
    if (existing && existing.definition !== text) {
      // Field names and schedule values only: a payload may hold what a log must not.
      const changed = (Object.keys(d) as (keyof ScheduleDefinition)[]).filter((k) => JSON.stringify(existing[k] ?? null) !== JSON.stringify(d[k] ?? null));
      logger.info(
        {
          schedule: name,
          changed,
          cron: d.cron,
          timezone: d.timezone,
          task: d.task,
          was: { cron: existing.cron, timezone: existing.timezone, task: existing.task },
        },
        "schedule updated",
      );
    }
    return "updated";
  }
}

/** Deletes a schedule and cancels its runs still pending. */
async function removeSchedule(db: JobsDatabase, name: string): Promise<boolean> {
  const { rowCount } = await db.executor.query(`DELETE FROM ${db.schedulesTable} WHERE name = $1`, [name]);
  await cancelPendingRuns(db, name);
  return rowCount > 0;
}

/** Cancels a schedule's runs that have not started: what `unschedule` and `pauseSchedule` promise. */
export async function cancelPendingRuns(db: JobsDatabase, name: string): Promise<number> {
  // A run that other jobs depend on releases them (by their policy) in the same transaction,
  // and every cancelled run moves into history in it.
  return whileEnding(db, () =>
    db.executor.transaction(async (tx) => {
      const pending = await tx.query<{ id: number | string }>(
        `SELECT id FROM ${db.table} WHERE status = 'pending' AND idempotency_key LIKE $1 ESCAPE '!' ORDER BY id${db.dialect === "sqlite" ? "" : " FOR UPDATE"}`,
        [slotKeyPattern(name)],
      );
      const ids = pending.rows.map((r) => Number(r.id));
      if (ids.length === 0) return 0;
      const { rowCount } = await tx.query(
        `UPDATE ${db.table} SET status = 'cancelled', claim_token = NULL, locked_until = NULL, finished_at = ${db.sql.now}, updated_at = ${db.sql.now}
         WHERE ${db.sql.inList("id", "$1")} AND status = 'pending'`,
        [ids],
      );
      await settleEndedIds(db, tx, ids, "cancelled");
      return rowCount;
    }),
  );
}

/** Removes a schedule and cancels its pending runs; running ones finish. False when there was none. */
export async function unschedule(name: string, options: DatabaseOptions = {}): Promise<boolean> {
  checkOptions(options, DATABASE_OPTION_KEYS, "unschedule");
  return removeSchedule(resolveDb(options.db), checkScheduleName(name, "unschedule"));
}

/** Stops a schedule from enqueuing and cancels its pending runs. False when there is no such schedule. */
export async function pauseSchedule(name: string, options: DatabaseOptions = {}): Promise<boolean> {
  checkOptions(options, DATABASE_OPTION_KEYS, "pauseSchedule");
  const db = resolveDb(options.db);
  const checked = checkScheduleName(name, "pauseSchedule");
  const { rowCount } = await db.executor.query(`UPDATE ${db.schedulesTable} SET paused = $2, updated_at = ${db.sql.now} WHERE name = $1`, [
    checked,
    flagParam(db, true),
  ]);
  if (rowCount === 0) return false;
  await cancelPendingRuns(db, checked);
  return true;
}

/**
 * Lets a paused schedule enqueue again, from its next slot after now: the slots that passed
 * while it was paused do not run.
 */
export async function resumeSchedule(name: string, options: DatabaseOptions = {}): Promise<boolean> {
  checkOptions(options, DATABASE_OPTION_KEYS, "resumeSchedule");
  const db = resolveDb(options.db);
  const row = await readSchedule(db, checkScheduleName(name, "resumeSchedule"));
  if (row === null) return false;
  if (!row.paused) return true;
  const next = cronSlots(row.cron, row.timezone).nextAfter(await databaseNow(db));
  await db.executor.query(`UPDATE ${db.schedulesTable} SET paused = $2, next_run_at = $3, updated_at = ${db.sql.now} WHERE name = $1`, [
    row.name,
    flagParam(db, false),
    timestampParam(db, next),
  ]);
  return true;
}

/** Every stored schedule, by name. */
export async function listSchedules(options: DatabaseOptions = {}): Promise<ScheduleStatus[]> {
  checkOptions(options, DATABASE_OPTION_KEYS, "listSchedules");
  const db = resolveDb(options.db);
  const { rows } = await db.executor.query<Record<string, unknown>>(`SELECT ${SCHEDULE_COLUMNS} FROM ${db.schedulesTable} ORDER BY name`, []);
  return rows.map((raw) => {
    const s = decodeSchedule(db, raw);
    return { name: s.name, cron: s.cron, timezone: s.timezone, task: s.task, queue: s.queue, nextRunAt: s.nextRunAt, lastRunAt: s.lastRunAt, paused: s.paused };
  });
}

/**
 * Enqueues one run of a schedule now, whatever its cron, paused or not, beside any run pending
 * (an operator asking for a run gets one). Its `ctx.scheduledAt` is now. Returns the job id.
 */
export async function triggerSchedule(name: string, options: DatabaseOptions = {}): Promise<number> {
  checkOptions(options, DATABASE_OPTION_KEYS, "triggerSchedule");
  const db = resolveDb(options.db);
  const row = await readSchedule(db, checkScheduleName(name, "triggerSchedule"));
  if (row === null) throw new JobError(`triggerSchedule: no schedule named ${JSON.stringify(name)}; listSchedules() shows the stored ones`, "name");
  return enqueue(
    row.task,
    row.payload as never,
    scheduledRun({
      db,
      queue: row.queue,
      ...(row.tenant === null ? {} : { tenant: row.tenant }),
      idempotencyKey: slotKey(row.name, await databaseNow(db)),
    }),
  );
}
