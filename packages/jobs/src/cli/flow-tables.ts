import { compareKeys, type LimitStatus } from "../flow/limits.js";
import type { GroupStatus } from "../flow/groups.js";
import type { FlowOverview } from "../flow/flow-overview.js";
import { formatDuration } from "../flow/wait-times.js";
import { renderTable } from "./table.js";

function rateText(limit: LimitStatus): string {
  return limit.rate === null ? "-" : `${limit.rate.limit}/${limit.rate.perSeconds}s`;
}

/** Limits as a table: a pattern's CONCURRENCY and RATE hold for each key it matches, its RUNNING and THROTTLED are summed over them. */
export function renderLimits(limits: LimitStatus[]): string {
  return renderTable(
    ["KEY", "RUNNING", "CONCURRENCY", "RATE", "BURST", "THROTTLED"],
    [...limits]
      .sort((a, b) => compareKeys(a.key, b.key))
      .map((l) => [l.key, l.running, l.concurrency ?? "-", rateText(l), l.rate?.burst ?? "-", l.throttled].map(String)),
  );
}

export function renderGroups(groups: GroupStatus[]): string {
  const wait = (ms: number | null) => formatDuration(ms).replace(" ", "");
  return renderTable(
    ["GROUP", "WEIGHT", "READY", "RUNNING", "WAIT_P50", "WAIT_P95"],
    groups.map((g) => [g.group, g.weight, g.ready, g.running, wait(g.waitP50Ms), wait(g.waitP95Ms)].map(String)),
  );
}

/** What `status` adds under the queues: limits and groups, when there are any. */
export function renderFlow(flow: FlowOverview | null): string {
  if (flow === null) return "";
  let text = "";
  if (flow.limits.length)
    text += `\nLimits (a pattern's limits hold for each key it matches; its RUNNING and THROTTLED are summed):\n${renderLimits(flow.limits)}`;
  if (flow.groups.length) text += `\nGroups (wait before start over the last 5 minutes):\n${renderGroups(flow.groups)}`;
  return text;
}
