import { MAX_AUTO_PREFETCH } from "../core/options.js";

/** Claim round trips the buffer should cover at full speed. */
const ROUND_TRIPS_COVERED = 2;
/** Weight of the newest sample in the running averages: recent runs count most, one outlier does not swing the size. */
const SAMPLE_WEIGHT = 0.1;

function average(previous: number, sample: number): number {
  return previous * (1 - SAMPLE_WEIGHT) + sample * SAMPLE_WEIGHT;
}

/**
 * How many jobs a worker holds beyond its running ones: a fixed number, or ("auto") as many
 * as finish during two claim round trips, measured as the worker runs — large batches for
 * quick jobs, next to none for slow ones, so no worker hoards long jobs.
 */
export class PrefetchSizer {
  private handlerMs: number | null = null;
  private claimMs = 2;

  constructor(
    private readonly concurrency: number,
    private readonly fixed: number | null,
  ) {}

  handlerTook(ms: number): void {
    this.handlerMs = this.handlerMs === null ? ms : average(this.handlerMs, ms);
  }

  claimTook(ms: number): void {
    this.claimMs = average(this.claimMs, ms);
  }

  target(): number {
    if (this.fixed !== null) return this.fixed;
    if (this.handlerMs === null) return this.concurrency;
    const needed = Math.ceil((ROUND_TRIPS_COVERED * this.concurrency * this.claimMs) / Math.max(this.handlerMs, 0.01));
    return Math.min(MAX_AUTO_PREFETCH, needed);
  }
}
