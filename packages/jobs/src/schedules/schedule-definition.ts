import type { JobsDatabase } from "../core/database.js";
import { checkHasSlots, checkTimezone, cronSlots } from "./cron-slots.js";
import { JobError } from "../base/errors.js";
import type { Logger } from "../base/logger.js";
import { DEFAULT_QUEUE, type DatabaseOptions, type DbLike } from "../core/options.js";
import { toJsonText } from "../base/payload.js";
import type { ScheduleDefinition } from "./schedule-rows.js";
import { MAX_FLOW_KEY_LENGTH, checkInteger, checkLength, checkName, checkTenant, describe } from "../base/validate.js";

// What a schedule is made of, and the checks of a declaration (schedules.ts stores it).

/** Slots `catchUp: "all"` runs after downtime when `catchUpLimit` is not given: the most recent ones. */
export const DEFAULT_CATCH_UP_LIMIT = 100;
/** Above this, a long outage's walk back (see scheduler.ts) could not promise the cap. */
const MAX_CATCH_UP_LIMIT = 1000;

/** What `schedule` takes besides the name and the cron expression. */
export interface ScheduleOptions {
  /** The task each run enqueues. */
  task: string;
  /** The payload of every run (JSON). */
  payload?: unknown;
  /** Default "default". */
  queue?: string;
  tenant?: string;
  /** IANA zone the cron expression is read in. Default "UTC". */
  timezone?: string;
  /** Slots missed while no scheduler ran: "none", the "last" one (default), or "all" up to `catchUpLimit`. */
  catchUp?: "none" | "last" | "all";
  /** With `catchUp: "all"`, at most this many missed slots run, the most recent. Default 100, at most 1,000. */
  catchUpLimit?: number;
  /** "skip" (default): no new run while the previous one is pending or running. "allow": runs may overlap. */
  overlap?: "allow" | "skip";
  db?: DbLike;
  /** Where the change of a redeclared schedule is logged. */
  logger?: Logger;
}

/** One schedule for `syncSchedules`. */
export interface ScheduleDeclaration extends Omit<ScheduleOptions, "db" | "logger"> {
  name: string;
  cron: string;
}

export interface SyncSchedulesOptions extends DatabaseOptions {
  logger?: Logger;
}

/** What declaring a schedule did. */
export type ScheduleChange = "created" | "updated" | "unchanged";

/** A stored schedule, as `listSchedules` reads it. */
export interface ScheduleStatus {
  name: string;
  cron: string;
  timezone: string;
  task: string;
  queue: string;
  /** The next slot not yet enqueued; null when the expression has none left. */
  nextRunAt: Date | null;
  /** The latest slot enqueued (or skipped by its overlap or catch-up policy). */
  lastRunAt: Date | null;
  paused: boolean;
}

export const SCHEDULE_OPTION_KEYS = ["task", "payload", "queue", "tenant", "timezone", "catchUp", "catchUpLimit", "overlap", "db", "logger"];
export const DECLARATION_KEYS = ["name", "cron", ...SCHEDULE_OPTION_KEYS.filter((k) => k !== "db" && k !== "logger")];

export function checkScheduleName(value: unknown, where: string): string {
  // Schedule names sit in a MariaDB primary key (VARCHAR(191)) and in each run's idempotency key.
  if (typeof value === "string") checkLength(value, MAX_FLOW_KEY_LENGTH, "name", where);
  return checkName(value, "name");
}

export function checkDefinition(cron: unknown, options: unknown, where: string): ScheduleDefinition {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new JobError(`${where}: options must be an object like { task: "report" }, got ${describe(options)}`, "options");
  }
  const o = options as ScheduleOptions;
  const timezone = o.timezone === undefined ? "UTC" : checkTimezone(o.timezone);
  checkHasSlots(cronSlots(cron, timezone), (cron as string).trim(), new Date());
  if (o.catchUp !== undefined && !["none", "last", "all"].includes(o.catchUp)) {
    throw new JobError(`${where}: catchUp must be "none", "last" or "all", got ${describe(o.catchUp)}`, "catchUp");
  }
  if (o.overlap !== undefined && o.overlap !== "allow" && o.overlap !== "skip") {
    throw new JobError(`${where}: overlap must be "skip" or "allow", got ${describe(o.overlap)}`, "overlap");
  }
  const payload = toJsonText(o.payload, "payload");
  return {
    cron: (cron as string).trim(),
    timezone,
    task: checkName(o.task, "task"),
    payload: payload === null ? null : (JSON.parse(payload) as unknown),
    queue: o.queue === undefined ? DEFAULT_QUEUE : checkName(o.queue, "queue"),
    tenant: checkTenant(o.tenant, "tenant", "a schedule whose runs have no tenant"),
    catchUp: o.catchUp ?? "last",
    catchUpLimit: o.catchUpLimit === undefined ? DEFAULT_CATCH_UP_LIMIT : checkInteger(o.catchUpLimit, "catchUpLimit", 1, MAX_CATCH_UP_LIMIT),
    overlap: o.overlap ?? "skip",
  };
}

/** Every run enqueues this payload: one too large for the queue is refused now, not at every slot. */
export function checkPayloadSize(db: JobsDatabase, d: ScheduleDefinition, where: string): void {
  const bytes = d.payload === null ? 0 : Buffer.byteLength(JSON.stringify(d.payload));
  if (bytes > db.settings.maxPayloadBytes) {
    throw new JobError(`${where}: payload is ${bytes} bytes of JSON; the limit is ${db.settings.maxPayloadBytes} (maxPayloadBytes in connect())`, "payload");
  }
}
