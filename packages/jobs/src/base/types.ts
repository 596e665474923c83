/** `waiting`: its dependencies (`dependsOn`) or its batch's items have not all ended; never claimed meanwhile. */
export type JobStatus = "pending" | "running" | "done" | "failed" | "cancelled" | "waiting";

/** Every status, in a job's order of life: what filters offer and accept. */
export const JOB_STATUSES: readonly JobStatus[] = ["waiting", "pending", "running", "done", "failed", "cancelled"];

/**
 * A task name may carry its payload type as a phantom, so that
 * `enqueue(MAIL_JOB_TASK, payload)` is type-checked without importing the package
 * that defines the task: `export const MAIL_JOB_TASK = "mail.send" as TaskName<MailPayload>`.
 */
export type TaskName<P = unknown> = string & { readonly __payload?: P };

/** The payload type a task name carries, or `unknown` for a plain string. */
export type PayloadOf<T> = T extends { readonly __payload?: infer P } ? Exclude<P, undefined> : unknown;

interface JobFields {
  id: number;
  queue: string;
  task: string;
  payload: unknown;
  priority: number;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
  /** When the job becomes (or became) runnable, by the database clock. */
  runAt: Date;
  progress: unknown;
  /** What the running (or last) run reported with `ctx.reportProgress`, or null: not the resume cursor `progress`. */
  liveProgress: unknown;
  /** Its durable steps (`ctx.step`, `ctx.sleep`, `ctx.waitForEvent`, `ctx.invoke`) in the order they were saved; empty for most jobs. */
  steps: JobStep[];
  /**
   * What the job waits for now (a durable sleep, an event, a child job: see JobWaitingFor; its
   * dependencies, a sequence's previous job: see JobDependencyWait), or null.
   */
  waitingFor: JobWaitingFor | JobDependencyWait | null;
  result: unknown;
  tenant: string | null;
  idempotencyKey: string | null;
  dedupKey: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** When the latest run started (null before the first claim). */
  startedAt: Date | null;
  /** Its fair-share group: the `group` it was enqueued with, else its tenant, else null. */
  group: string | null;
  /** The key its concurrency and rate limits apply to, or null. */
  concurrencyKey: string | null;
  /** How many times a run snoozed it (`snooze`): not failures, not attempts. */
  snoozes: number;
  /** Snoozes allowed before it fails. */
  maxSnoozes: number;
  /** The jobs it waits for (`dependsOn`), in id order; empty for most jobs. */
  dependsOn: number[];
  /** The jobs that wait for it, in id order; empty for most jobs. */
  dependents: number[];
  /** The batch (`enqueueBatch`) it is an item of, or null. */
  batchId: number | null;
}

export type PendingJob = JobFields & { status: "pending" };
export type RunningJob = JobFields & { status: "running"; lockedUntil: Date; heartbeatAt: Date };
export type DoneJob = JobFields & { status: "done"; finishedAt: Date };
export type FailedJob = JobFields & { status: "failed"; finishedAt: Date; lastError: string };
export type CancelledJob = JobFields & { status: "cancelled"; finishedAt: Date };
export type WaitingJob = JobFields & { status: "waiting" };

/** One durable step of a job (`ctx.step`, `ctx.sleep`, `ctx.waitForEvent`, `ctx.invoke`), as saved. */
export interface JobStep {
  name: string;
  /** `event`: a wait's answer (the event's data, or null for a timeout); `invoke`: how a child job ended. */
  kind: "step" | "sleep" | "event" | "invoke";
  /** `done`: saved (a step's result, a sleep that is over); `sleeping`: the sleep the job waits out now. */
  status: "done" | "sleeping";
  /** The job's attempt that saved it (a sleep gives its attempt back: the next run has the same number). */
  attempt: number;
  /** How long a step's function ran, in ms (the transaction's commit included); null for a sleep. */
  durationMs: number | null;
  /** Size of the saved JSON in bytes; 0 when the function returned undefined, and for a sleep. */
  resultBytes: number;
  /** A sleep's wake time; null for a step. */
  wakeAt: Date | null;
  savedAt: Date;
}

/** What `getJob` returns: one row of the jobs table, discriminated by `status`. */
export type Job = PendingJob | RunningJob | DoneJob | FailedJob | CancelledJob | WaitingJob;

/**
 * One dependency of a running job, as `ctx.dependencies()` reads it. `R`: what the caller says
 * its handlers returned (`ctx.dependencies<ImportReport>()`); stored JSON, not checked.
 */
export interface DependencyInfo<R = unknown> {
  id: number;
  task: string;
  /** done, or failed/cancelled when the job runs under `onDependencyFailure: "run"`. */
  status: JobStatus;
  /** Its handler's result (JSON), or null. */
  result: R | null;
}

/** What a batch's callback reads with `ctx.batch()`: how its items ended. */
export interface BatchSummary {
  batchId: number;
  done: number;
  failed: number;
  cancelled: number;
  /** Ids of the items that failed, in id order. */
  failedIds: number[];
}

/** What a handler learns about the job it runs. */
export interface JobInfo {
  id: number;
  task: string;
  queue: string;
  /** 1 on the first run. */
  attempt: number;
  maxAttempts: number;
  tenant: string | null;
  createdAt: Date;
}

/** A running job taken back from a lost worker (`reclaim()`, the `job:reclaimed` event). */
export interface ReclaimedJob {
  id: number;
  queue: string;
  task: string;
  attempts: number;
  /**
   * pending: back in the queue (a job its worker held but never started keeps its attempts);
   * failed: it had no attempt left.
   */
  status: "pending" | "failed";
}

export interface JobContext {
  job: JobInfo;
  /** Fences every write of this run: once another worker holds the job, this token is stale. */
  claimToken: string;
  /** Fires when the lease is lost, the job is cancelled, or the worker shuts down. */
  signal: AbortSignal;
  /** The last progress saved by `checkpoint` (by this run or an earlier attempt), or null. */
  progress: unknown;
  /** A scheduled run's planned time (its slot), however late it runs; null for a job not enqueued by a schedule. */
  scheduledAt: Date | null;
  /** Extends the lease; false when this worker no longer owns the job (stop working). */
  heartbeat(): Promise<boolean>;
  /**
   * Runs `work(tx)` — the handler's own writes, on the queue's connection — and saves
   * `progress`, in one transaction fenced by the claim token. Resolves false (and rolls
   * everything back) when the job was taken over. `progress` may be a function of what
   * `work` returned: it is called once the work ran, inside the same transaction, and its
   * value saved (for progress that counts what the work did).
   */
  checkpoint<Tx = unknown, R = unknown>(progress: unknown, work?: (tx: Tx) => R): Promise<boolean>;
  /**
   * Live progress for people watching (getJob's `liveProgress`, the dashboard's
   * `/jobs/:id/events`): any JSON value, kept apart from the resume cursor `progress`. Throttled
   * (at most one write per job every 500 ms; the latest value is written when the interval
   * ends, and before the run's outcome) and fenced by the claim token. Resolves false once
   * the job was found taken over.
   */
  reportProgress(value: unknown): Promise<boolean>;
  /** The jobs this one depended on (`dependsOn`), with their status and result, in id order; empty without dependencies. */
  dependencies<R = unknown>(): Promise<DependencyInfo<R>[]>;
  /** For a batch's callback (`enqueueBatch`'s `onComplete`): how the items ended; null for any other job. */
  batch(): Promise<BatchSummary | null>;
  /**
   * A durable step: runs `fn` once per job and saves its result (JSON), fenced by the claim
   * token; a later run of the job (a retry, a resumed sleep) gets the saved result back without
   * running `fn`. `fn` declaring a parameter runs inside a transaction on the queue's connection
   * and is handed its driver object (`tx`, as `checkpoint`'s work): its writes and the saved
   * result commit together. `name` identifies the step: once per run, stable between runs. The
   * value returned is the saved JSON's, on the first run as on a replay (a `Date` comes back as
   * its ISO string). Throws `JobAbortedError` (nothing saved) when the job was taken over.
   */
  step<T, Tx = unknown>(name: string, fn: (tx: Tx) => T | Promise<T>): Promise<Awaited<T>>;
  /**
   * A durable sleep: ends the run here (it throws; let it propagate) without using an attempt,
   * freeing the worker's slot; the job is due again in `seconds` (database clock) and runs from
   * the top, its earlier steps answered from storage, and this call then returns. `name`
   * identifies it like a step's. At most MAX_SLEEP_SECONDS (366 days).
   */
  sleep(name: string, seconds: number): Promise<void>;
  /** As `sleep`, until `date` (compared with the database clock); a date already past still ends the run once. */
  sleepUntil(name: string, date: Date): Promise<void>;
  /**
   * A durable wait for an event (`sendEvent`) of the name `event` and key `key`, of this job's
   * tenant: ends the run here (it throws; let it propagate) without using an attempt or holding a
   * slot; the job is `waiting` until such an event comes (its data is returned) or `timeout`
   * seconds pass (null is returned), then runs again from the top. An event sent at or after the
   * job was created, before the wait began, is delivered at once. `name` identifies the wait like
   * a step's: its answer is saved, and later runs get it back without waiting.
   */
  waitForEvent<T = unknown>(name: string, options: WaitForEventOptions): Promise<T | null>;
  /**
   * Runs `task` as a child job and returns its result: enqueues the child once per step (same
   * tenant, a re-run gets the same child), then ends the run (it throws; let it propagate) without
   * using an attempt or holding a slot; the job is `waiting` on its child (a dependency) and runs
   * again from the top when the child ended, and this call then returns the child's result — or
   * throws `ChildJobError` if the child failed or was cancelled. `name` identifies it like a step's.
   */
  invoke<R = unknown>(name: string, task: string, payload?: unknown, options?: InvokeOptions): Promise<R>;
}

/**
 * `ctx.invoke`'s options: the child's job options, as `enqueue`'s. Its tenant is the parent's and
 * its idempotency key is the invocation's own, so those are not among them.
 */
export interface InvokeOptions {
  queue?: string;
  priority?: number;
  maxAttempts?: number;
  availableIn?: number;
  group?: string;
  concurrencyKey?: string;
}

/** What `ctx.waitForEvent` waits for. */
export interface WaitForEventOptions {
  /** The event's name, as given to `sendEvent`. */
  event: string;
  /** The key the event must carry (an order id…): only an event of this key wakes the wait. */
  key: string;
  /** Seconds to wait at most (database clock), more than 0; left out, the wait lasts until the event comes. */
  timeout?: number;
}

/** `(payload, ctx) => result`; the resolved value is stored as the job's `result` (JSON). */
export type JobHandler<P = unknown, R = unknown> = (payload: P, ctx: JobContext) => R | Promise<R>;

/**
 * The worker side: task name → handler. Parameters are `never` so that handlers typed for
 * their own payload (`(p: MailPayload) => …`) fit without casts.
 */
export type Handlers = Readonly<Record<string, (payload: never, ctx: JobContext) => unknown>>;

export interface StatusCountsByState {
  pending: number;
  running: number;
  failed: number;
  done: number;
  cancelled: number;
  /** Waiting on dependencies or on a batch: not claimable yet, and not counted as pending. */
  waiting: number;
}

/** One queue's counters, as shown by `forge-jobs status`. */
export interface QueueStatus {
  queue: string;
  counts: StatusCountsByState;
  /** Pending and runnable now (not delayed by `availableIn` or a retry backoff). */
  ready: number;
  total: number;
  /** Age in seconds of the oldest ready job (how far behind the workers are), or null. */
  oldestReadyAge: number | null;
  /** Paused by `pauseQueue`: workers start none of its jobs until `resumeQueue`. */
  paused: boolean;
}

/**
 * What a job waits for: the sleep it waits out (a `pending` job, due at `until`); the event a
 * `waiting` job waits for (`until`: when its timeout ends the wait, null for none); the child
 * job a `waiting` job waits for (`ctx.invoke`).
 */
/**
 * What a `waiting` job enqueued with `dependsOn` or a `sequence` waits for (getJob's
 * `waitingFor`): `jobIds`, its dependencies that have not ended done, in id order (a
 * sequenced job's is the previous job of its key); `held`, those among them that failed and
 * hold it (`onDependencyFailure: "hold"`, a sequence's default) until they are retried and end
 * done (`retryJob`) or are cancelled (`cancelJob`).
 */
export interface JobDependencyWait {
  kind: "dependencies";
  jobIds: number[];
  held: number[];
}

export type JobWaitingFor =
  | { kind: "sleep"; step: string; until: Date }
  | { kind: "event"; step: string; event: string; key: string; until: Date | null }
  | { kind: "child"; step: string; childId: number };
