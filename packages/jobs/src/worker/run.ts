import { RunAbort } from "../base/abort.js";
import type { JobInfo } from "../base/types.js";
import type { ClaimedJob } from "../run/claim.js";
import { jobInfo } from "../run/execute.js";

/**
 * One claimed job in a worker, from its claim until the write of its verdict, and the one
 * record of where it stands:
 *
 *     claim ──(its attempt counted by the claim)─────────────────────────────► running
 *       └──► buffered ──(start write sent)──► starting ──(ours)──────────────► running
 *              ▲                                 │
 *              └──(write failed: lease in doubt; │ or the worker is stopping)
 *                                                └──(not ours any more)──────► fenced
 *     running ──(handler returned)──► settling ──(its write landed)──► done, retried, snoozed, failed or fenced
 *
 * Off the main line: a buffered run whose lease the keeper finds lost is fenced; at shutdown,
 * buffered runs are handed back (their attempt unused), and running ones whose grace ran out
 * too, their signal fired. A running run found lost (lease, cancel) stays running until its
 * handler returns, its signal fired and its writes refused by the token. A run leaves the
 * worker when it ends (the last four), never in a state of its own.
 */
export type RunState = "buffered" | "starting" | "running" | "settling";

const NEXT: Record<RunState, readonly RunState[]> = {
  buffered: ["starting"],
  starting: ["running", "buffered"],
  running: ["settling"],
  settling: [],
};

export interface Run {
  readonly job: ClaimedJob;
  readonly info: JobInfo;
  state: RunState;
  /**
   * While buffered: when its lease was last known fresh (performance.now() of its claim), or
   * -Infinity after a failed start write, until the lease keeper confirms it (see StartWrites).
   */
  heldAt: number;
  readonly abort: RunAbort;
  /** Set on entering running. */
  startedAt: number;
  /** Its start write's answer (at once when the claim counted its attempt): the write that ends the run waits for it. */
  answered: Promise<unknown>;
  /** Settles once its verdict is written (or given up). */
  done: Promise<void>;
  /** Settling, its success waits in the completion batch: its lease is still extended. */
  unwritten: boolean;
}

export function newRun(job: ClaimedJob, state: "buffered" | "running"): Run {
  return {
    job,
    info: jobInfo(job),
    state,
    heldAt: performance.now(),
    abort: new RunAbort(),
    startedAt: 0,
    answered: Promise.resolve(),
    done: Promise.resolve(),
    unwritten: false,
  };
}

/** Moves a run to its next state; anything but a transition above is a bug, said at once. */
export function moveRun(run: Run, to: RunState): void {
  if (!NEXT[run.state].includes(to)) throw new Error(`job ${run.job.id}: ${run.state} → ${to} is not a transition of a run`);
  run.state = to;
}
