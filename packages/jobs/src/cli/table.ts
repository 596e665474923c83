import type { QueueStatus } from "../base/types.js";

/** An aligned table: the first column left-aligned, the others right-aligned so a glance compares numbers. */
export function renderTable(columns: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = columns.map((c, i) => Math.max(c.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number)))
      .join("  ")
      .trimEnd();
  return [line(columns), ...rows.map(line)].join("\n") + "\n";
}

/** The status table. */
export function renderStatus(statuses: QueueStatus[]): string {
  if (statuses.length === 0) return "no jobs yet\n";
  // STATE only when a queue is paused, and last: scripts that read the columns by position keep working.
  const state = statuses.some((s) => s.paused);
  return renderTable(
    // WAITING (on dependencies or a batch) last: scripts that read the columns by position keep working.
    ["QUEUE", "PENDING", "RUNNING", "FAILED", "DONE", "READY", "WAITING", ...(state ? ["STATE"] : [])],
    statuses.map((s) => [
      ...[s.queue, s.counts.pending, s.counts.running, s.counts.failed, s.counts.done, s.ready, s.counts.waiting].map(String),
      ...(state ? [s.paused ? "paused" : "active"] : []),
    ]),
  );
}
