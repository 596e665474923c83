import { Cron } from "croner";
import { JobError } from "../base/errors.js";

/**
 * A schedule's slots as instants. croner parses the expression (five or six fields, nicknames)
 * and walks it on a clock without daylight saving (UTC read as wall time); this module maps each
 * wall time to an instant of the zone by DESIGN.md's rule. croner's own zone handling applies
 * that rule only to single-value expressions (`30 2 * * *`): an interval one (`*\/15 2 * * *`)
 * skips a missing slot and runs a repeated one twice, which is the double and the lost run we
 * promise not to have.
 */
export interface CronSlots {
  /** The first slot strictly after `after`. Null when the expression has no more (a past year). */
  nextAfter(after: Date): Date | null;
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
/**
 * How far ahead a new schedule must have a slot. An expression has no year field, so whatever
 * it names repeats within the leap-year cycle; the longest wait is February 29 across a century
 * year that has none (2096 to 2104): eight years, counted here in 366-day years to spare the edge.
 */
const SLOT_HORIZON_MS = 8 * 366 * DAY;

const formatters = new Map<string, Intl.DateTimeFormat>();

/** A time zone name the runtime knows, or a JobError saying so. */
export function checkTimezone(zone: unknown): string {
  if (typeof zone !== "string" || zone.length === 0)
    throw new JobError(`timezone must be an IANA zone name like "Europe/Paris", got ${JSON.stringify(zone)}`, "timezone");
  try {
    formatterFor(zone);
  } catch {
    throw new JobError(`timezone ${JSON.stringify(zone)} is not a time zone this Node.js knows; use an IANA name like "Europe/Paris" or "UTC"`, "timezone");
  }
  return zone;
}

/** Parses `cron` for `zone`; a JobError names what is wrong with the expression. */
export function cronSlots(cron: unknown, zone: string): CronSlots {
  if (typeof cron !== "string" || cron.trim() === "")
    throw new JobError(`cron must be a cron expression like "30 2 * * *" or "@daily", got ${JSON.stringify(cron)}`, "cron");
  let pattern: Cron;
  try {
    pattern = new Cron(cron.trim(), { utcOffset: 0, mode: "5-or-6-parts", paused: true });
  } catch (error) {
    throw new JobError(
      `cron ${JSON.stringify(cron)} is not a valid expression (${(error as Error).message}); use five fields (minute hour day month weekday), six with seconds first, or @hourly, @daily, @weekly, @monthly, @yearly`,
      "cron",
    );
  }
  checkTimezone(zone);
  return {
    nextAfter(after) {
      // Wall time is monotone in the instant it maps to, and no wall time before after's own maps
      // past it (a gap's slots map to its end, a repeated hour's to its first pass): walk from there.
      let wall: Date | null = new Date(after.getTime() + offsetMs(zone, after.getTime()) - 1);
      for (;;) {
        wall = pattern.nextRun(wall);
        if (wall === null) return null;
        const instant = instantOf(zone, wall.getTime());
        if (instant > after.getTime()) return new Date(instant);
      }
    },
  };
}

/**
 * Refuses an expression that names no time that exists (February 30, April 31): stored, it would
 * never run and say nothing. `now` is where the search starts.
 */
export function checkHasSlots(slots: CronSlots, cron: string, now: Date): void {
  const next = slots.nextAfter(now);
  if (next === null || next.getTime() - now.getTime() > SLOT_HORIZON_MS) {
    throw new JobError(
      `cron ${JSON.stringify(cron)} has no slot in the next 8 years, so it would never run: its day of month does not exist in the months it names (like February 30 or April 31); fix the day-of-month or month field`,
      "cron",
    );
  }
}

function formatterFor(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(zone, formatter);
  }
  return formatter;
}

/** Offsets per zone and minute: a walk over a busy expression asks for the same minutes again and again. */
const offsetCache = new Map<string, number>();
const OFFSET_CACHE_SIZE = 50_000;

/**
 * The zone's offset from UTC at an instant, in ms (wall = instant + offset). Read per whole
 * minute: offsets change on minute boundaries in every zone of the database this century.
 */
export function offsetMs(zone: string, instant: number): number {
  const minute = Math.floor(instant / MINUTE) * MINUTE;
  const key = `${zone}@${minute}`;
  let offset = offsetCache.get(key);
  if (offset === undefined) {
    const parts: Record<string, number> = {};
    for (const part of formatterFor(zone).formatToParts(new Date(minute))) if (part.type !== "literal") parts[part.type] = Number(part.value);
    offset = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!) - minute;
    if (offsetCache.size >= OFFSET_CACHE_SIZE) offsetCache.clear();
    offsetCache.set(key, offset);
  }
  return offset;
}

/**
 * The instant a wall time (ms, read as UTC) names in `zone`: its first occurrence when the
 * clocks went back over it, the end of the gap when they jumped over it.
 */
export function instantOf(zone: string, wall: number): number {
  const before = offsetMs(zone, wall - DAY);
  // No change of offset within a day either side (nearly every slot): one instant, no search.
  if (before === offsetMs(zone, wall + DAY) && offsetMs(zone, wall - before) === before) return wall - before;
  const offsets = new Set([before, offsetMs(zone, wall), offsetMs(zone, wall + DAY)]);
  const valid = [...offsets].map((o) => wall - o).filter((instant) => offsetMs(zone, instant) === wall - instant);
  if (valid.length > 0) return Math.min(...valid);
  // In a gap: the transition lies between the instants the wall time names under the offsets
  // before and after it; the first instant of the new offset is the first valid one after the slot.
  const candidates = [...offsets].map((o) => wall - o).sort((a, b) => a - b);
  let low = candidates[0]!;
  let high = candidates[candidates.length - 1]!;
  const after = offsetMs(zone, high);
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (offsetMs(zone, middle) === after) high = middle;
    else low = middle;
  }
  return high;
}
