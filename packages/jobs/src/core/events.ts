import type { JobInfo, ReclaimedJob } from "../base/types.js";

/**
 * What every event of one run carries: the job, and the run's claim token (`ctx.claimToken`).
 * The token tells two runs of the same job at the same attempt apart: a buffered job whose start
 * was refused used no attempt, so it may be claimed and run again with that attempt number.
 */
export type RunEvent = {
  job: JobInfo;
  claimToken: string;
};

/** Every event a worker (or processOne / drain) emits, with its payload. */
export interface WorkerEvents {
  "job:claimed": RunEvent;
  "job:started": RunEvent & { waitMs: number };
  "job:succeeded": RunEvent & { durationMs: number };
  /** The run threw (or had no handler). `willRetry` says whether it goes back to pending. */
  "job:failed": RunEvent & { error: unknown; willRetry: boolean; retryInSeconds: number | null; durationMs: number };
  "job:retried": RunEvent & { retryInSeconds: number };
  /** Taken back from a lost worker by this worker's sweep. */
  "job:reclaimed": { job: ReclaimedJob };
  /**
   * A running job's lease was extended (the worker's lease keeper, or the handler's
   * `ctx.heartbeat()`): the database accepted the extension that left at `sentAt`.
   */
  "job:heartbeat": RunEvent & { sentAt: Date };
  /** A write of a run that no longer owns its job was refused. */
  "job:fenced": RunEvent & { write: "start" | "complete" | "fail" | "snooze" | "release" | "heartbeat" | "checkpoint" | "step" | "sleep" | "progress" };
  /**
   * The handler snoozed (an error with `snoozeSeconds`, or `snooze()`): back to pending, due in
   * `snoozeSeconds`, its attempt given back. `snoozes` counts this one.
   */
  "job:snoozed": RunEvent & { snoozeSeconds: number; snoozes: number };
  /** The handler slept (`ctx.sleep`, `ctx.sleepUntil`): back to pending until its wake time, its attempt given back. */
  "job:slept": RunEvent & { step: string };
  /** Handed back without consuming an attempt (shutdown, or a buffered job of a queue paused meanwhile). */
  "job:released": RunEvent;
  /**
   * A claim held back pending jobs of these concurrency keys: at their concurrency limit or out
   * of tokens. `retryInMs`: when the next token refills, if a rate held one back.
   */
  "worker:throttled": { workerId: string; keys: string[]; retryInMs: number | null };
  "worker:started": { workerId: string; queues: readonly string[]; concurrency: number };
  "worker:idle": { workerId: string };
  "worker:stopping": { workerId: string; inFlight: number };
  "worker:stopped": { workerId: string };
  /** Something failed around the jobs (lost connection, reconnecting …); the worker carries on. */
  "worker:error": { workerId: string; error: unknown; during: string };
}

export type WorkerEventName = keyof WorkerEvents;
export type WorkerListener<E extends WorkerEventName> = (event: WorkerEvents[E]) => void;
export type WorkerEventHandlers = { [E in WorkerEventName]?: WorkerListener<E> };

/**
 * Typed listeners. Owned by one worker (or one processOne/drain call); a listener that throws
 * is isolated: the worker never breaks because of it.
 */
export class WorkerEmitter {
  private readonly listeners = new Map<WorkerEventName, Set<(event: never) => void>>();

  constructor(initial?: WorkerEventHandlers) {
    if (initial) {
      for (const [name, listener] of Object.entries(initial)) {
        if (listener) this.on(name as WorkerEventName, listener as WorkerListener<WorkerEventName>);
      }
    }
  }

  on<E extends WorkerEventName>(name: E, listener: WorkerListener<E>): () => void {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, (set = new Set()));
    set.add(listener as (event: never) => void);
    return () => this.off(name, listener);
  }

  off<E extends WorkerEventName>(name: E, listener: WorkerListener<E>): void {
    this.listeners.get(name)?.delete(listener as (event: never) => void);
  }

  has(name: WorkerEventName): boolean {
    return (this.listeners.get(name)?.size ?? 0) > 0;
  }

  emit<E extends WorkerEventName>(name: E, event: WorkerEvents[E]): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const listener of set) {
      try {
        (listener as WorkerListener<E>)(event);
      } catch {
        // A broken listener must not break the queue; nothing else to do with its error.
      }
    }
  }
}
