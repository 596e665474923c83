import { JobError } from "../base/errors.js";
import { checkKnownOptions } from "../base/validate.js";
import type {
  AdminOptions,
  ConnectOptions,
  DatabaseOptions,
  DrainOptions,
  EnqueueManyItem,
  EnqueueManyOptions,
  EnqueueOptions,
  HeartbeatOptions,
  JobDefaults,
  JobOptions,
  ProcessOptions,
  PruneHistoryOptions,
  PruneOptions,
  QueueJobDefaults,
  QueueReadOptions,
  ReadOptions,
  ReclaimOptions,
  WorkerOptions,
} from "./options.js";

// The accepted keys of every public call, beside the option types of options.ts: each list is
// the keys of a `Record<keyof Options, true>`, so the compiler refuses a list that misses a key
// of its interface or names one it does not have.

/** The keys of `T`, in the record's order (error messages list them so). */
function keysOf<T>(all: Record<keyof T, true>): readonly string[] {
  return Object.keys(all);
}

// Typed records, not `as const`: a key spread into a larger list is checked here.
const JOB_KEYS: Record<keyof JobOptions, true> = {
  queue: true,
  maxAttempts: true,
  availableIn: true,
  priority: true,
  idempotencyKey: true,
  dedupKey: true,
  throttle: true,
  debounce: true,
  deadLetter: true,
  tenant: true,
  group: true,
  concurrencyKey: true,
  maxSnoozes: true,
  priorityAging: true,
  dependsOn: true,
  onDependencyFailure: true,
  sequence: true,
};
const PROCESS_KEYS: Record<keyof ProcessOptions, true> = { queue: true, db: true, lease: true, events: true, logger: true };

export const ENQUEUE_OPTION_KEYS = keysOf<EnqueueOptions>({ ...JOB_KEYS, db: true });
export const ENQUEUE_ITEM_KEYS = keysOf<EnqueueManyItem>({ task: true, payload: true, ref: true, ...JOB_KEYS });
export const ENQUEUE_MANY_OPTION_KEYS = keysOf<EnqueueManyOptions>({ queue: true, db: true });
export const WORKER_OPTION_KEYS = keysOf<WorkerOptions>({
  queue: true,
  concurrency: true,
  prefetch: true,
  pollInterval: true,
  lease: true,
  gracePeriod: true,
  sweepInterval: true,
  progressInterval: true,
  signal: true,
  db: true,
  events: true,
  logger: true,
  workerId: true,
  schedules: true,
});
export const PROCESS_OPTION_KEYS = keysOf<ProcessOptions>(PROCESS_KEYS);
export const DRAIN_OPTION_KEYS = keysOf<DrainOptions>({ ...PROCESS_KEYS, maxJobs: true, signal: true });
export const READ_OPTION_KEYS = keysOf<ReadOptions>({ db: true, tenant: true });
export const QUEUE_READ_OPTION_KEYS = keysOf<QueueReadOptions>({ db: true, tenant: true, queue: true });
export const ADMIN_OPTION_KEYS = keysOf<AdminOptions>({ db: true, tenant: true });
export const PRUNE_OPTION_KEYS = keysOf<PruneOptions>({ olderThan: true, statuses: true, batchSize: true, into: true, db: true });
export const PRUNE_HISTORY_OPTION_KEYS = keysOf<PruneHistoryOptions>({ olderThan: true, db: true });
export const RECLAIM_OPTION_KEYS = keysOf<ReclaimOptions>({ lease: true, queue: true, db: true });
export const HEARTBEAT_OPTION_KEYS = keysOf<HeartbeatOptions>({ lease: true, db: true });
export const DATABASE_OPTION_KEYS = keysOf<DatabaseOptions>({ db: true });
export const CONNECT_OPTION_KEYS = keysOf<ConnectOptions>({
  schema: true,
  maxPayloadBytes: true,
  maxResultBytes: true,
  payloadCodec: true,
  poolSize: true,
  pooler: true,
  listenUrl: true,
  readUrl: true,
  jobDefaults: true,
});
export const JOB_DEFAULTS_KEYS = keysOf<JobDefaults>({ maxAttempts: true, queues: true });
export const QUEUE_JOB_DEFAULTS_KEYS = keysOf<QueueJobDefaults>({ maxAttempts: true, deadLetter: true, priorityAging: true });

/**
 * Checked before anything runs, at every public entry point: a typo'd option (`tenantId`,
 * `prority`) would otherwise be ignored and the call act unscoped or with a default.
 */
export function checkOptions(options: unknown, keys: readonly string[], where: string): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new JobError(
      `${where}: options must be an object, got ${Array.isArray(options) ? "an array" : options === null ? "null" : typeof options}`,
      "options",
    );
  }
  checkKnownOptions(options, keys, where);
}
