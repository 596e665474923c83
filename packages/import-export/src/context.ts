/**
 * What the queue hands a handler, as far as this package cares. Every member is optional
 * and detected at run time: the package fits the queue's handler shape structurally and
 * still runs when called by hand or by a queue that offers less.
 */
export interface JobContextLike {
  job?: {
    id?: unknown;
    task?: string;
    queue?: string;
    attempt?: number;
    maxAttempts?: number;
  };
  signal?: AbortSignal;
  heartbeat?: () => Promise<boolean>;
  progress?: unknown;
  checkpoint?: Checkpoint;
  /** Live progress for people watching (`@forge/jobs` throttles the writes); not the resume cursor. */
  reportProgress?: (value: unknown) => Promise<boolean>;
}

/**
 * Runs `work(tx)` and saves `progress` in one transaction fenced by the claim; false = taken
 * over. `progress` may be a function of what `work` returned (`@forge/jobs` calls it inside
 * the transaction, after the work): an import with a natural key saves its counts that way.
 */
export type Checkpoint = (progress: unknown, work?: (tx: unknown) => Promise<unknown>) => Promise<boolean>;

export interface Capabilities {
  signal: AbortSignal | undefined;
  heartbeat: (() => Promise<boolean>) | undefined;
  checkpoint: Checkpoint | undefined;
  progress: unknown;
  /** Absent where the queue offers none: the import reports nothing then. */
  reportProgress?: (value: unknown) => Promise<boolean>;
}

function member(ctx: object, name: string): unknown {
  return (ctx as Record<string, unknown>)[name];
}

export function capabilities(ctx: unknown): Capabilities {
  if (typeof ctx !== "object" || ctx === null) {
    return { signal: undefined, heartbeat: undefined, checkpoint: undefined, progress: null };
  }
  const signal = member(ctx, "signal");
  const heartbeat = member(ctx, "heartbeat");
  const checkpoint = member(ctx, "checkpoint");
  const reportProgress = member(ctx, "reportProgress");
  return {
    ...(typeof reportProgress === "function" ? { reportProgress: (value: unknown) => reportProgress.call(ctx, value) as Promise<boolean> } : {}),
    signal: signal instanceof AbortSignal ? signal : undefined,
    heartbeat: typeof heartbeat === "function" ? () => heartbeat.call(ctx) as Promise<boolean> : undefined,
    checkpoint:
      typeof checkpoint === "function"
        ? (progress, work) => (work === undefined ? checkpoint.call(ctx, progress) : checkpoint.call(ctx, progress, work)) as Promise<boolean>
        : undefined,
    progress: member(ctx, "progress") ?? null,
  };
}
