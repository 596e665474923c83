import { JobError } from "../base/errors.js";
import { DEFAULT_AVAILABLE_IN, DEFAULT_MAX_SNOOZES, DEFAULT_PRIORITY, MAX_MAX_ATTEMPTS, type JobOptions } from "../core/options.js";
import type { DatabaseSettings } from "../core/database.js";
import { checkDeadLetter, defaultDeadLetter, defaultMaxAttempts } from "../core/job-defaults.js";
import { ENQUEUE_ITEM_KEYS } from "../core/option-keys.js";
import { toJsonText } from "../base/payload.js";
import { sealJson } from "../base/payload-codec.js";
import {
  MAX_FLOW_KEY_LENGTH,
  checkFlowKey,
  checkLength,
  checkInteger,
  checkJobKey,
  checkName,
  checkSeconds,
  checkTenant,
  SCHEDULER_ENQUEUE,
} from "../base/validate.js";
import { checkThrottle, type ThrottledJob } from "./throttle.js";
import { checkDebounce, firstDelay, type DebouncedJob } from "./debounce.js";
import { jobAging } from "../core/aging.js";
import type { JobAging } from "../core/database.js";

/** run_at must fit every backend's timestamps (MariaDB's DATETIME ends with year 9999). */
const MAX_DELAY_SECONDS = 1000 * 365.25 * 86400;
const ITEM_KEY_SET = new Set(ENQUEUE_ITEM_KEYS);

/** The jobs table's columns every insert fills, in the order of NewJob's values in every statement. */
export const INSERT_COLUMNS =
  "queue, task, payload, priority, max_attempts, run_at, tenant, idempotency_key, dedup_key, trace_context, group_key, concurrency_key, max_snoozes";

/**
 * Columns an insert fills only when one of its jobs needs them; the other rows of that
 * statement get the column's default value written out. A chunk of plain jobs sends none of
 * them: the plain path binds and copies no more than it did before these options existed.
 * - `due`: false for a plain job that waits (isDue); the column's default is true.
 * - `dead_letter`: the `deadLetter` queue; default null.
 * - `aging`: `aging_base, aging_every, aging_max` (priority aging); default null.
 */
export type ExtraColumns = "due" | "dead_letter" | "aging";

/** One extra: whether a job needs it in its insert, and its columns with each one's value in a job. */
interface ExtraColumn {
  needed: (job: NewJob) => boolean;
  columns: readonly { name: string; value: (job: NewJob) => unknown }[];
}

/** The extras in the statement's order; every insert statement reads its columns and values from here. */
export const EXTRA_COLUMNS: Readonly<Record<ExtraColumns, ExtraColumn>> = {
  due: { needed: (j) => !isDue(j), columns: [{ name: "due", value: isDue }] },
  dead_letter: { needed: (j) => j.deadLetter !== null, columns: [{ name: "dead_letter", value: (j) => j.deadLetter }] },
  aging: {
    needed: (j) => j.aging !== null,
    // The base priority aging starts from, its step and its ceiling.
    columns: [
      { name: "aging_base", value: (j) => (j.aging === null ? null : j.priority) },
      { name: "aging_every", value: (j) => j.aging?.every ?? null },
      { name: "aging_max", value: (j) => j.aging?.max ?? null },
    ],
  },
};
const EXTRA_ORDER = Object.keys(EXTRA_COLUMNS) as ExtraColumns[];

/** The extra columns `jobs` need in their insert, in the statement's order. */
export function extraColumns(jobs: readonly NewJob[]): ExtraColumns[] {
  return EXTRA_ORDER.filter((extra) => jobs.some(EXTRA_COLUMNS[extra].needed));
}

/** The column list of an insert with `extras`. */
export function insertColumns(extras: readonly ExtraColumns[]): string {
  return [INSERT_COLUMNS, ...extras.flatMap((e) => EXTRA_COLUMNS[e].columns.map((c) => c.name))].join(", ");
}

/**
 * Whether a new job goes into the claim index (migration 19): all but a plain job that waits.
 * Jobs with a group or a concurrency key are always due: the fair claim reads them by group.
 */
export function isDue(job: Pick<NewJob, "delay" | "group" | "concurrencyKey">): boolean {
  return !(job.delay > 0 && job.group === "" && job.concurrencyKey === "");
}

/** One validated row, ready to insert. */
export interface NewJob {
  queue: string;
  task: string;
  payload: string | null;
  priority: number;
  maxAttempts: number;
  delay: number;
  tenant: string | null;
  idempotencyKey: string | null;
  dedupKey: string | null;
  /** The `throttle` option; keyThrottledJobs turns it into the idempotency key before the insert. */
  throttle: ThrottledJob["throttle"];
  /** The `debounce` option; such a job is enqueued by enqueueDebounced, its delay the window's first. */
  debounce: DebouncedJob["debounce"];
  /** The queue it goes to when it fails for good, or null (run/dead-letter.ts). */
  deadLetter: string | null;
  /** JSON of the enqueuing span's context (OpenTelemetry), or null. */
  trace: string | null;
  /** The fair-share group ('' for none): the `group` option, else the tenant. */
  group: string;
  /** '' for none. */
  concurrencyKey: string;
  maxSnoozes: number;
  /** Priority aging (`priorityAging`), or null. */
  aging: JobAging | null;
}

/** What an insert returns for each row it wrote (a keyed job that conflicted returns none). */
export interface InsertedRow {
  id: number | string;
  idempotency_key: string | null;
  dedup_key: string | null;
}

export function hasKey(job: NewJob): boolean {
  return job.idempotencyKey !== null || job.dedupKey !== null;
}

/**
 * A delay in seconds that every backend can add to its clock. Checked here, with the rest of
 * the input, for every dialect: on PostgreSQL a huge one used to reach the INSERT and come back
 * as the driver's "timestamp out of range" instead of a JobError.
 */
function checkDelay(value: unknown, field: string): number {
  const delay = checkSeconds(value, field);
  if (delay > MAX_DELAY_SECONDS) throw new JobError(`${field} must be at most ${MAX_DELAY_SECONDS} seconds (1000 years), got ${delay}`, field);
  return delay;
}

/** Task and queue names already checked: a bulk enqueue checks its one task name once. */
const checkedNames = new Set<string>();

function checkedName(value: unknown, field: () => string): string {
  if (typeof value === "string" && checkedNames.has(value)) return value;
  const name = checkName(value, field());
  if (checkedNames.size < 1000) checkedNames.add(name);
  return name;
}

/** What a job's checks read from its database: the payload limit and `jobDefaults`. */
export type EnqueueSettings = Pick<DatabaseSettings, "maxPayloadBytes" | "jobDefaults" | "payloadCodec">;

/**
 * Checks a job given as arguments and turns it into a row. `where` is the item's index in
 * enqueueMany, or null; field names are built only for an error.
 */
export function prepareJob(
  task: unknown,
  payload: unknown,
  options: JobOptions,
  defaultQueue: string,
  settings: EnqueueSettings,
  where: number | null,
): NewJob {
  const { maxPayloadBytes } = settings;
  const field = (name: string) => (where === null ? name : `items[${where}].${name}`);
  const json = toJsonText(payload, () => field("payload"));
  if (json !== null && json.length * 3 > maxPayloadBytes && Buffer.byteLength(json) > maxPayloadBytes) {
    throw new JobError(
      `${field("payload")} is ${Buffer.byteLength(json)} bytes of JSON; the limit is ${maxPayloadBytes} (store large data elsewhere and pass a reference, or raise maxPayloadBytes in connect())`,
      field("payload"),
    );
  }
  // A symbol the package does not export (and checkOptions does not list): only the scheduler has it.
  const scheduler = (options as { [SCHEDULER_ENQUEUE]?: boolean })[SCHEDULER_ENQUEUE] === true;
  const tenant = checkTenant(options.tenant, field("tenant"), "a job without a tenant");
  const group = options.group === undefined ? "" : checkFlowKey(options.group, field("group"));
  if (group === "" && tenant !== null) {
    try {
      checkLength(tenant, MAX_FLOW_KEY_LENGTH, `${field("tenant")} is the job's fair-share group and`);
    } catch (error) {
      // Said about the tenant, with what to do: give a shorter group.
      throw new JobError(`${(error as Error).message}; give a shorter group`, field("tenant"));
    }
  }
  const name = checkedName(task, () => field("task"));
  const queue = options.queue === undefined ? defaultQueue : checkedName(options.queue, () => field("queue"));
  const debounce = options.debounce === undefined ? null : checkDebounce(options, field, where);
  const priority = options.priority === undefined ? DEFAULT_PRIORITY : checkInteger(options.priority, field("priority"), -2_147_483_648);
  return {
    task: name,
    queue,
    // Sealed after the size check, which counts what the caller sent.
    payload: json === null ? null : sealJson(settings.payloadCodec, json),
    priority,
    maxAttempts:
      options.maxAttempts === undefined
        ? defaultMaxAttempts(settings.jobDefaults, queue)
        : checkInteger(options.maxAttempts, field("maxAttempts"), 1, MAX_MAX_ATTEMPTS),
    delay:
      debounce !== null
        ? firstDelay(debounce)
        : options.availableIn === undefined
          ? DEFAULT_AVAILABLE_IN
          : checkDelay(options.availableIn, field("availableIn")),
    tenant,
    idempotencyKey: options.idempotencyKey == null ? null : checkJobKey(options.idempotencyKey, field("idempotencyKey"), scheduler),
    dedupKey: options.dedupKey == null ? null : checkJobKey(options.dedupKey, field("dedupKey"), scheduler),
    throttle: options.throttle === undefined ? null : checkThrottle(options, field),
    debounce,
    deadLetter:
      options.deadLetter === undefined
        ? defaultDeadLetter(settings.jobDefaults, queue)
        : options.deadLetter === null
          ? null
          : checkDeadLetter(options.deadLetter, queue, field("deadLetter")),
    trace: null,
    group: group === "" ? (tenant ?? "") : group,
    concurrencyKey: options.concurrencyKey === undefined ? "" : checkFlowKey(options.concurrencyKey, field("concurrencyKey")),
    maxSnoozes: options.maxSnoozes === undefined ? DEFAULT_MAX_SNOOZES : checkInteger(options.maxSnoozes, field("maxSnoozes"), 0, 1_000_000),
    aging: jobAging(options.priorityAging, priority, queue, settings.jobDefaults, field("priorityAging")),
  };
}

/** The usual enqueueMany item, checked without building its "items[i]" label (checkOptions explains the rest). */
export function isItemShaped(item: unknown): boolean {
  if (typeof item !== "object" || item === null || Array.isArray(item)) return false;
  for (const key in item) if (!ITEM_KEY_SET.has(key)) return false;
  return true;
}
