import type { QueueStatus } from "../types.js";

const COLUMNS = ["QUEUE", "PENDING", "RUNNING", "FAILED", "DONE", "READY"] as const;

/** The status table, aligned; numbers right-aligned so a glance compares them. */
export function renderStatus(statuses: QueueStatus[]): string {
  if (statuses.length === 0) return "no jobs yet\n";
  const rows = statuses.map((s) => [s.queue, s.counts.pending, s.counts.running, s.counts.failed, s.counts.done, s.ready].map(String));
  const widths = COLUMNS.map((c, i) => Math.max(c.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join("  ");
  return [line(COLUMNS), ...rows.map(line)].join("\n") + "\n";
}
