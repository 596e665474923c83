import type { JobsDatabase } from "../core/database.js";
import { toDate } from "../core/job-row.js";
import { SCHEDULER_ENQUEUE } from "../base/validate.js";

/** What a `schedule` call defines; the stored `definition` is this, as canonical JSON. */
export interface ScheduleDefinition {
  cron: string;
  timezone: string;
  task: string;
  payload: unknown;
  queue: string;
  tenant: string | null;
  catchUp: "none" | "last" | "all";
  catchUpLimit: number;
  overlap: "allow" | "skip";
}

/** One row of jobs_schedules, decoded. */
export interface ScheduleRow extends ScheduleDefinition {
  name: string;
  paused: boolean;
  fromCode: boolean;
  definition: string;
  nextRunAt: Date | null;
  lastRunAt: Date | null;
}

export const SCHEDULE_COLUMNS =
  "name, cron, timezone, task, payload, queue, tenant, catch_up, catch_up_limit, overlap, paused, from_code, definition, next_run_at, last_run_at";

/** The fields in a fixed order: two declarations of the same schedule store the same text. */
export function definitionText(d: ScheduleDefinition): string {
  return JSON.stringify([d.cron, d.timezone, d.task, d.payload ?? null, d.queue, d.tenant, d.catchUp, d.catchUpLimit, d.overlap]);
}

export function decodeSchedule(db: JobsDatabase, row: Record<string, unknown>): ScheduleRow {
  const dateOrNull = (value: unknown) => (value === null || value === undefined ? null : toDate(value));
  return {
    name: String(row.name),
    cron: String(row.cron),
    timezone: String(row.timezone),
    task: String(row.task),
    payload: db.sql.readJson(row.payload),
    queue: String(row.queue),
    tenant: row.tenant === null || row.tenant === undefined ? null : String(row.tenant),
    catchUp: String(row.catch_up) as ScheduleDefinition["catchUp"],
    catchUpLimit: Number(row.catch_up_limit),
    overlap: String(row.overlap) as ScheduleDefinition["overlap"],
    paused: Boolean(Number(row.paused)),
    fromCode: Boolean(Number(row.from_code)),
    definition: String(row.definition),
    nextRunAt: dateOrNull(row.next_run_at),
    lastRunAt: dateOrNull(row.last_run_at),
  };
}

/**
 * A timestamp as a statement parameter: SQLite stores epoch milliseconds, MariaDB's DATETIME(6)
 * holds UTC and is given it as text (a Date would be converted by the pool's own time zone).
 */
export function timestampParam(db: JobsDatabase, date: Date | null): unknown {
  if (date === null) return null;
  if (db.dialect === "sqlite") return date.getTime();
  if (db.dialect === "mysql") return date.toISOString().replace("T", " ").replace("Z", "");
  return date;
}

/** The database clock, read once: the scheduler's "now" in production. */
export async function databaseNow(db: JobsDatabase): Promise<Date> {
  const { rows } = await db.executor.query<{ now: unknown }>(`SELECT ${db.sql.now} AS now`, []);
  return toDate(rows[0]!.now);
}

/** Booleans as each backend's column takes them. */
export function flagParam(db: JobsDatabase, value: boolean): unknown {
  return db.dialect === "postgres" ? value : value ? 1 : 0;
}

/** Enqueue options of a schedule's run: the only enqueue that may use the keys starting with "schedule:". */
export function scheduledRun<T extends object>(options: T): T {
  return Object.assign(options, { [SCHEDULER_ENQUEUE]: true });
}

/** The idempotency key of a slot's job; its uniqueness is what makes a slot run once. */
export function slotKey(name: string, slot: Date): string {
  return `schedule:${name}@${slot.toISOString()}`;
}

const SLOT_KEY = /^schedule:(.+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)$/;

/** A scheduled job's planned time, read back from its idempotency key; null for other jobs. */
export function scheduledAtOf(idempotencyKey: string | null | undefined): Date | null {
  const match = idempotencyKey ? SLOT_KEY.exec(idempotencyKey) : null;
  return match ? new Date(match[2]!) : null;
}

/** The LIKE pattern of a schedule's slot keys (its pending runs), to use with `ESCAPE '!'` (one escape character on every backend). */
export function slotKeyPattern(name: string): string {
  return `schedule:${name.replace(/[!%_]/g, (c) => `!${c}`)}@%`;
}
