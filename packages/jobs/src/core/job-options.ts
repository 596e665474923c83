import type { DbLike } from "./db-like.js";
import type { PayloadOf } from "../base/types.js";

// What a job carries: the option types of enqueue, enqueueMany and enqueueBatch and of
// jobDefaults. core/options.ts re-exports them and holds their numeric defaults with every
// other: import them from there.

export interface JobOptions {
  /** Queue name. Default "default". */
  queue?: string;
  /**
   * Total runs allowed (first run included). Default: the database's `jobDefaults` for this
   * queue, else 1 — one run and no retry, so a job whose worker is killed mid-run ends failed.
   */
  maxAttempts?: number;
  /** Seconds before the job may run. Default 0. */
  availableIn?: number;
  /** Larger runs first; PRIORITY_LOW/NORMAL/HIGH are -10/0/10. Default 0. */
  priority?: number;
  /** Same key → same job id, for as long as the row exists. Empty = no key. */
  idempotencyKey?: string;
  /** At most one pending-or-running job per key; free again once that job ends. */
  dedupKey?: string;
  /** At most one job per key per fixed window of the database clock; later enqueues in the window get its id. See `ThrottleWindow`. */
  throttle?: ThrottleWindow;
  /** One pending job per key whose start each enqueue pushes back and whose payload it replaces. `enqueue` only. See `DebounceWindow`. */
  debounce?: DebounceWindow;
  /**
   * The queue this job goes to, as a `DEAD_LETTER_TASK` job (see `DeadLetterPayload`), when it
   * fails for good. Default: its queue's `jobDefaults` entry, else none; null = none.
   */
  deadLetter?: string | null;
  /**
   * Owner of the job (an organisation id): tenant-scoped reads never see other tenants' jobs.
   * Leave it out for a job without a tenant; an empty or non-string tenant is a JobError.
   */
  tenant?: string;
  /**
   * The job's fair-share group: within a queue and priority, claims serve groups in weighted
   * round-robin (`setGroupWeight`). Default: the tenant; jobs with neither form one group.
   * At most 191 characters; empty = none.
   */
  group?: string;
  /**
   * The key its concurrency and rate limits apply to (`setLimit`), e.g. `smtp:ses` or `org:42`.
   * Default none: a job without one is never held back by a limit. At most 191 characters; empty = none.
   */
  concurrencyKey?: string;
  /** Snoozes allowed (see `snooze`) before the job fails saying so. Default 100. */
  maxSnoozes?: number;
  /**
   * Priority aging: while the job waits, the workers' sweep raises its priority one step per
   * `everySeconds` (database clock, counted from its `runAt`), up to `max` (default
   * `PRIORITY_HIGH`), so a low priority never starves under a stream of higher ones. `null`:
   * none, also when the queue's `jobDefaults` has some. Default: the queue's, else none.
   */
  priorityAging?: PriorityAging | null;
  /**
   * Ids of jobs (same tenant) this one waits for: it stays `waiting` until every one has ended,
   * and runs once all are `done`. In `enqueueMany`, an item may also name another item's `ref`.
   */
  dependsOn?: readonly number[];
  /**
   * What happens when a dependency fails for good or is cancelled: fail this job (default),
   * cancel it, run it anyway, or `"hold"`: a failed dependency holds it `waiting` until that job
   * is retried (`retryJob`) and ends done, or is cancelled (`cancelJob`); a cancelled one releases it.
   */
  onDependencyFailure?: DependencyFailurePolicy;
  /**
   * Strict order per key: the jobs enqueued with one key run one at a time, in the order their
   * enqueues commit, across workers and processes. A string is the key (1–191 characters); see
   * `SequenceOptions` for the failure policy. Not with `dependsOn`, `onDependencyFailure`,
   * `ref`, `idempotencyKey`, `dedupKey`, `throttle` or `debounce`, nor in `enqueueBatch`.
   */
  sequence?: string | SequenceOptions;
}

/**
 * The `sequence` option. `key`: 1–191 characters, shared by all tenants (include the tenant in
 * it). `onFailure`: when a job of the key fails for good, `"hold"` (default) keeps the key's
 * later jobs `waiting` until it is retried and ends done, or is cancelled; `"continue"` lets
 * the next one run. A cancelled job always lets the next one run.
 */
export interface SequenceOptions {
  key: string;
  onFailure?: SequenceFailurePolicy;
}

/** See `SequenceOptions.onFailure`. */
export type SequenceFailurePolicy = "hold" | "continue";
/** The default of `SequenceOptions.onFailure`. */
export const DEFAULT_SEQUENCE_FAILURE: SequenceFailurePolicy = "hold";

/**
 * The `throttle` option: windows are fixed slots of `seconds` by the database clock
 * (slot = floor(epoch seconds / seconds)). `key` is 1–200 characters; `seconds` an integer from
 * 1 to 31,622,400 (366 days). Not combinable with `idempotencyKey` or `dedupKey`.
 */
export interface ThrottleWindow {
  key: string;
  seconds: number;
}

/**
 * The `debounce` option: while the key's job is pending and has not started, an enqueue with
 * the key replaces its payload and moves its start to `seconds` from now (database clock), but
 * never later than `maxWait` seconds after the job was first enqueued; it returns that job's id.
 * Once the job has started (or ended), the next enqueue makes a new job. `key` is 1–255
 * characters; `seconds` and `maxWait` are numbers > 0. Only with `enqueue`, and not with
 * `idempotencyKey`, `dedupKey`, `throttle`, `availableIn` or `dependsOn`.
 */
export interface DebounceWindow {
  key: string;
  seconds: number;
  maxWait?: number;
}

/** See `JobOptions.onDependencyFailure`. */
export type DependencyFailurePolicy = "fail" | "cancel" | "run" | "hold";

export interface EnqueueOptions extends JobOptions {
  /** A database from connect(), a pool, or a client inside your own transaction. */
  db?: DbLike;
}

export interface EnqueueManyItem<T extends string = string> extends Omit<JobOptions, "queue" | "dependsOn"> {
  task: T;
  payload?: PayloadOf<T>;
  queue?: string;
  /** A name for this item that other items of the same call list in their `dependsOn` (a flow in one call). */
  ref?: string;
  /** Job ids, or `ref`s of items of the same call. */
  dependsOn?: readonly (number | string)[];
}

export interface EnqueueManyOptions {
  queue?: string;
  db?: DbLike;
}

/** `ConnectOptions.jobDefaults`: defaults for every queue, and per queue. */
export interface JobDefaults {
  /** Total runs allowed, first included, for jobs of every queue (1 to 1,000,000). Default 1. */
  maxAttempts?: number;
  /** Per queue name: wins over the defaults above for that queue's jobs. */
  queues?: Readonly<Record<string, QueueJobDefaults>>;
}

/** `priorityAging` of `enqueue` and of a queue's `jobDefaults`. */
export interface PriorityAging {
  /** Seconds of waiting per priority step (an integer, at least 1). */
  everySeconds: number;
  /** The highest priority aging gives the job; above the job's own. Default `PRIORITY_HIGH` (10). */
  max?: number;
}

/** One queue's entry in `JobDefaults.queues`. */
export interface QueueJobDefaults {
  /** Total runs allowed, first included, for this queue's jobs (1 to 1,000,000). */
  maxAttempts?: number;
  /** The dead-letter queue of this queue's jobs (another queue), for jobs enqueued without `deadLetter`. */
  deadLetter?: string;
  /** Priority aging of this queue's jobs enqueued without `priorityAging` (none for a job already at or above its `max`). */
  priorityAging?: PriorityAging;
}
