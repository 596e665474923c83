/**
 * Wait before start (`started_at - run_at`) summarised for people: the dashboard's queues and
 * groups, `listGroups` and `forge-jobs status` read it the same way.
 */

/** p50 and p95 of waits in milliseconds, over `sample` jobs; NaN when the sample is empty. */
export interface WaitTimes {
  p50: number;
  p95: number;
  sample: number;
}

/** p50 and p95 of `values` (linear interpolation between the closest ranks, as percentile_cont). */
export function waitTimes(values: readonly number[]): WaitTimes {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), p95: percentile(sorted, 0.95), sample: sorted.length };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const at = (sorted.length - 1) * p;
  const low = Math.floor(at);
  const high = Math.ceil(at);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (at - low);
}

/** 850 → "850 ms", 30_040 → "30 s", 150_000 → "2.5 min", 7_200_000 → "2.0 h"; "—" when there is nothing to show. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
  const value = Math.max(0, ms);
  if (value < 999.5) return `${Math.round(value)} ms`;
  if (value < 59_950) return `${scaled(value / 1000)} s`;
  if (value < 3_597_000) return `${scaled(value / 60_000)} min`;
  return `${scaled(value / 3_600_000)} h`;
}

/** One decimal under 10, whole numbers above. */
function scaled(n: number): string {
  return n < 9.95 ? n.toFixed(1) : String(Math.round(n));
}
