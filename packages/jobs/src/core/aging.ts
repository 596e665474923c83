import { JobError } from "../base/errors.js";
import { PRIORITY_HIGH } from "../base/priority.js";
import { checkInteger, checkKnownOptions, describe } from "../base/validate.js";
import type { JobAging, ResolvedJobDefaults } from "./database.js";

/** `priorityAging.max` left out: aging lifts a job up to the named high priority, no further. */
export const DEFAULT_AGING_MAX = PRIORITY_HIGH;
const AGING_KEYS = ["everySeconds", "max"];

/** Checks a `priorityAging` value (of enqueue or of a queue's jobDefaults); `field` names it. */
export function checkAging(value: unknown, field: string): JobAging {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new JobError(`${field} must be an object such as { everySeconds: 60, max: 10 }, got ${describe(value)}`, field);
  }
  checkKnownOptions(value as Record<string, unknown>, AGING_KEYS, field);
  const { everySeconds, max } = value as { everySeconds?: unknown; max?: unknown };
  return {
    every: checkInteger(everySeconds, `${field}.everySeconds`, 1),
    max: max === undefined ? DEFAULT_AGING_MAX : checkInteger(max, `${field}.max`, -2_147_483_648),
  };
}

/**
 * The aging a job of `queue` with `priority` gets: its own option (`null`: none), else its
 * queue's default, which skips a job already at or above the default's max. A job's own
 * option with a max at or below its priority could never raise it: refused.
 */
export function jobAging(option: unknown, priority: number, queue: string, defaults: ResolvedJobDefaults, field: string): JobAging | null {
  if (option === null) return null;
  if (option === undefined) {
    const aging = defaults.agingByQueue?.get(queue);
    return aging !== undefined && aging.max > priority ? aging : null;
  }
  const aging = checkAging(option, field);
  if (aging.max <= priority) {
    throw new JobError(
      `${field}.max (${aging.max}) must be above the job's priority (${priority}); give a higher max or leave priorityAging out`,
      `${field}.max`,
    );
  }
  return aging;
}
