import type { ClaimedJob } from "../../../src/run/claim.js";
import { JobAbortedError, type Handlers, type JobContext, type ReclaimedJob, type WorkerEventHandlers } from "../../../src/index.js";
import type { Child } from "./children.js";

/**
 * What a fault test saw happen, one event per line, from every process: producers record the
 * enqueues that returned an id, worker processes (fixtures/worker.ts with `history: true`)
 * record their claims, heartbeats and verdicts as the queue reported them, the test records
 * the processes it killed. `at` is the recording process's wall clock (one host, one clock);
 * `sentAt` is when the write was issued, so "granted before the write was sent" is certain.
 * checkHistory (history-check.ts) judges it against the table's final state.
 */
export type HistoryEvent =
  /** An enqueue that returned this id to its caller. */
  | { kind: "enqueued"; at: number; job: number; by: string }
  /** A run started with this claim token (the handler was called). */
  | { kind: "claimed"; at: number; job: number; attempt: number; token: string; worker: string }
  /**
   * The start write of the run holding `token` was refused (`job:fenced`, write `start`): its
   * handler had already been called — on PostgreSQL a handler runs as soon as its start write
   * has left, while its lease is fresh — but the job was no longer this claim's (cancelled, or
   * taken by a forced `reclaim({ lease: 0 })`). The table never counted that run: it held no
   * attempt, and every write it sends must be refused.
   */
  | { kind: "start-refused"; at: number; job: number; token: string; worker: string }
  /** A heartbeat of the run holding `token`: extended (accepted) or refused (fenced). */
  | { kind: "heartbeat"; at: number; sentAt: number; job: number; token: string; worker: string; accepted: boolean }
  /** The run's completion: written (accepted) or refused (fenced). */
  | { kind: "completed"; at: number; sentAt: number; job: number; token: string; worker: string; accepted: boolean }
  /** The run's failure: written (accepted; `willRetry` if it went back to pending) or refused. */
  | { kind: "failed"; at: number; sentAt: number; job: number; token: string; worker: string; accepted: boolean; willRetry: boolean }
  /** A sweep took the job back from a lost run; `attempts` as it stood. */
  | { kind: "reclaimed"; at: number; job: number; attempts: number; worker: string; status: "pending" | "failed" }
  /**
   * A durable step's save (`ctx.step`) by the run holding `token`: its result (and its `tx`
   * writes) committed (accepted), or refused with JobAbortedError, nothing saved. `sentAt` is
   * when the step's function returned, just before its save was sent. A step answered from
   * storage (saved by an earlier run) is no save: not recorded.
   */
  | { kind: "step"; at: number; sentAt: number; job: number; token: string; worker: string; name: string; accepted: boolean }
  /** Handed back at shutdown without using its attempt. */
  | { kind: "released"; at: number; job: number; attempt: number; worker: string }
  /** The test killed this worker process: what it had not printed yet is lost with it. */
  | { kind: "died"; at: number; worker: string };

export type HistoryKind = HistoryEvent["kind"];

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
/** An event as a recorder takes it: `at` is stamped when it is recorded. */
export type Unstamped = DistributiveOmit<HistoryEvent, "at">;

/** The table's verdict on a job at the end of the test. */
export interface FinalJob {
  id: number;
  status: string;
  attempts: number;
}

/** The history lines a worker process printed (fixtures/worker.ts prints `{ type: "history", event }`). */
export function historyOf(children: Iterable<Child>): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  for (const child of children) {
    for (const message of child.messages) if (message.type === "history") events.push(message.event as HistoryEvent);
  }
  return events;
}

/** Records a killed process; call it just before the kill. */
export function died(worker: string): HistoryEvent {
  return { kind: "died", at: Date.now(), worker };
}

/** Records an acknowledged enqueue. */
export function enqueued(job: number, by: string): HistoryEvent {
  return { kind: "enqueued", at: Date.now(), job, by };
}

/** Reads every job's final verdict (id, status, attempts) from a jobs table; only `queue`'s when given (a table shared by several tests). */
export async function finalJobs(query: (sql: string) => Promise<{ rows: Record<string, unknown>[] }>, table: string, queue?: string): Promise<FinalJob[]> {
  const { rows } = await query(`SELECT id, status, attempts, queue FROM ${table}`);
  return rows
    .filter((r) => queue === undefined || r.queue === queue)
    .map((r) => ({ id: Number(r.id), status: String(r.status), attempts: Number(r.attempts) }));
}

/** Records the jobs a `reclaim()` call took back (the test's own sweep). */
export function reclaimedBy(worker: string, jobs: readonly ReclaimedJob[]): HistoryEvent[] {
  const at = Date.now();
  return jobs.map((job) => ({ kind: "reclaimed", at, job: job.id, attempts: job.attempts, worker, status: job.status }));
}

/** Records the runs a direct `claimJobs` call started (a job it holds unstarted is no run yet). */
export function claimedBy(worker: string, jobs: readonly ClaimedJob[]): HistoryEvent[] {
  const at = Date.now();
  return jobs.filter((job) => job.started).map((job) => ({ kind: "claimed", at, job: job.id, attempt: job.attempt, token: job.token, worker }));
}

/** Records direct `completeRuns` calls' verdicts: `accepted` is the set of tokens it kept; `sentAt` when the call was made. */
export function completedBy(worker: string, jobs: readonly ClaimedJob[], accepted: ReadonlySet<string>, sentAt: number): HistoryEvent[] {
  const at = Date.now();
  return jobs.map((job) => ({ kind: "completed", at, sentAt, job: job.id, token: job.token, worker, accepted: accepted.has(job.token) }));
}

/**
 * The history of one worker (a process's, or an in-process one's), as fixtures/worker.ts
 * records it: `wrap` records each run's claim (the handler was called) with its token, and
 * `events` (a worker's, or drain's, `events` option) its verdicts — completion and failure
 * written, or refused (`job:fenced`) — its heartbeats (the lease keeper's and the handler's,
 * accepted: `job:heartbeat`, or refused), its sweeps' reclaims and its hand-backs. Runs are known by
 * their claim token, which every run event carries (not by job and attempt: a buffered job whose
 * start was refused used no attempt, and the same worker may run it again at the same attempt),
 * mapped to when the handler returned (the verdict's `sentAt`). `now` is the clock it
 * stamps with: the host's, one for every process of the test (a worker whose `Date` is skewed
 * on purpose passes the real one).
 */
export function historyRecorder(worker: string, sink: (event: HistoryEvent) => void, now: () => number = () => Date.now()) {
  const runs = new Map<string, { token: string; returnedAt: number }>();
  const record = (event: Unstamped) => sink({ ...event, at: now() } as HistoryEvent);
  const runOf = (claimToken: string) => runs.get(claimToken);
  type Handler = (payload: never, ctx: JobContext) => unknown;
  const events: WorkerEventHandlers = {
    "job:succeeded": ({ job, claimToken }) => {
      const run = runOf(claimToken);
      if (run) record({ kind: "completed", sentAt: run.returnedAt, job: job.id, token: run.token, worker, accepted: true });
    },
    "job:failed": ({ job, claimToken, willRetry }) => {
      const run = runOf(claimToken);
      if (run) record({ kind: "failed", sentAt: run.returnedAt, job: job.id, token: run.token, worker, accepted: true, willRetry });
    },
    // sentAt by the worker's own Date: the time since then, on the recorder's clock.
    "job:heartbeat": ({ job, claimToken, sentAt }) => {
      const run = runOf(claimToken);
      if (run) record({ kind: "heartbeat", sentAt: now() - (Date.now() - sentAt.getTime()), job: job.id, token: run.token, worker, accepted: true });
    },
    "job:fenced": ({ job, claimToken, write }) => {
      const run = runOf(claimToken);
      if (!run) return; // refused before it started (a prefetched job): no run, nothing it wrote
      const base = { job: job.id, token: run.token, worker, accepted: false };
      if (write === "complete") record({ kind: "completed", sentAt: run.returnedAt, ...base });
      else if (write === "fail") record({ kind: "failed", sentAt: run.returnedAt, willRetry: false, ...base });
      else if (write === "heartbeat") record({ kind: "heartbeat", sentAt: now(), ...base });
      else if (write === "start") record({ kind: "start-refused", job: job.id, token: run.token, worker });
    },
    "job:reclaimed": ({ job }) => record({ kind: "reclaimed", job: job.id, attempts: job.attempts, worker, status: job.status }),
    "job:released": ({ job }) => record({ kind: "released", job: job.id, attempt: job.attempt, worker }),
  };
  return {
    record,
    events,
    wrap<H extends Handlers>(handlers: H): H {
      return Object.fromEntries(
        Object.entries(handlers).map(([task, handler]) => [
          task,
          async (payload: never, ctx: JobContext) => {
            const run = { token: ctx.claimToken, returnedAt: Number.POSITIVE_INFINITY };
            runs.set(ctx.claimToken, run);
            record({ kind: "claimed", job: ctx.job.id, attempt: ctx.job.attempt, token: ctx.claimToken, worker });
            recordSteps(ctx, worker, record, now);
            try {
              return await (handler as Handler)(payload, ctx);
            } finally {
              run.returnedAt = now();
            }
          },
        ]),
      ) as unknown as H;
    },
  };
}

/**
 * Replaces the run's `ctx.step` (in place: the context keeps its identity) by one that records
 * each save: accepted when the step's function ran and the step returned, refused when the step
 * threw JobAbortedError (the queue's `job:fenced` says only `write: "step"`, not which step).
 */
function recordSteps(ctx: JobContext, worker: string, record: (event: Unstamped) => void, now: () => number): void {
  const step: JobContext["step"] = ctx.step.bind(ctx);
  const base = { job: ctx.job.id, token: ctx.claimToken, worker };
  const recorded: JobContext["step"] = async <T, Tx>(name: string, fn: (tx: Tx) => T | Promise<T>): Promise<Awaited<T>> => {
    let returnedAt: number | undefined;
    const timed = async <T>(work: () => T | Promise<T>) => {
      const value = await work();
      returnedAt = now();
      return value;
    };
    // The same arity as the handler's function: a parameter is what asks for the transaction.
    const wrapped = fn.length === 0 ? () => timed(() => (fn as () => unknown)()) : (tx: never) => timed(() => fn(tx));
    try {
      const value = await step(name, wrapped as typeof fn);
      if (returnedAt !== undefined) record({ kind: "step", sentAt: returnedAt, ...base, name, accepted: true });
      return value;
    } catch (error) {
      if (error instanceof JobAbortedError) record({ kind: "step", sentAt: returnedAt ?? now(), ...base, name, accepted: false });
      throw error;
    }
  };
  ctx.step = recorded;
}
