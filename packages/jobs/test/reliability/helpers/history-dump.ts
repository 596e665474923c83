import type { Child } from "./children.js";
import type { Violation } from "./history-check.js";
import type { HistoryEvent } from "./history.js";

type Query = (sql: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

/**
 * Everything known about the jobs a history check flagged, for a failure's message: each job's
 * recorded events in the checker's order (by `at`), every line a worker printed about it, and
 * its rows (`tables`: a label and a statement of one parameter, the job's id).
 */
export async function dumpViolatingJobs(
  violations: readonly Violation[],
  history: readonly HistoryEvent[],
  children: Iterable<Child>,
  query: Query,
  tables: Record<string, string>,
): Promise<string> {
  const jobs = [...new Set(violations.map((v) => v.job))].slice(0, 5);
  const lines: string[] = [];
  const deaths = history.filter((e) => e.kind === "died");
  for (const job of jobs) {
    lines.push(
      `--- job ${job}: ${violations
        .filter((v) => v.job === job)
        .map((v) => `${v.invariant}: ${v.detail}`)
        .join("; ")}`,
    );
    const events = [...history.filter((e) => e.kind !== "died" && e.job === job), ...deaths].sort((a, b) => a.at - b.at);
    for (const e of events) lines.push(`  event ${JSON.stringify(e)}`);
    for (const child of children) {
      child.messages.forEach((m, i) => {
        if (m.type !== "history" && m.job === job) lines.push(`  ${child.label} said ${JSON.stringify(m)}`);
        // How long the worker had been silent when it recorded a claim: a stalled process shows here.
        const event = m.event as HistoryEvent | undefined;
        if (m.type === "history" && event?.kind === "claimed" && event.job === job && i > 0)
          lines.push(
            `  ${child.label} printed nothing for ${Number(m.at) - Number(child.messages[i - 1]!.at)} ms before that claim: ${JSON.stringify(child.messages[i - 1])}`,
          );
      });
    }
    for (const [label, sql] of Object.entries(tables)) {
      try {
        for (const row of await query(sql, [job])) lines.push(`  ${label} ${JSON.stringify(row)}`);
      } catch (error) {
        lines.push(`  ${label}: ${(error as Error).message}`);
      }
    }
  }
  return lines.join("\n");
}
