import type { FlowOverview } from "../flow/flow-overview.js";
import type { GroupStatus } from "../flow/groups.js";
import { isPattern } from "../flow/limit-rules.js";
import type { LimitStatus } from "../flow/limits.js";
import { formatDuration } from "../flow/wait-times.js";
import { html, type Html } from "./escape.js";

// The flow-control panels: limits per key or pattern and fair-share groups, from listLimits and
// listGroups. Nothing at all on a schema older than flow control (`flow` null).

function number(n: number, kind: string, alarm = false): Html {
  return html`<td class="n${n === 0 ? " zero" : alarm ? " bad" : ""}" data-count="${kind}">${n}</td>`;
}

function concurrencyCell(limit: LimitStatus): Html {
  if (limit.concurrency === null) return html`<td class="n zero" data-limit-concurrency>—</td>`;
  const each = isPattern(limit.key) ? " per key" : "";
  return html`<td class="n" data-limit-concurrency="${limit.concurrency}">${limit.concurrency}${each}</td>`;
}

function rateCell(limit: LimitStatus): Html {
  if (limit.rate === null) return html`<td class="n zero" data-limit-rate>—</td>`;
  const { limit: n, perSeconds, burst } = limit.rate;
  return html`<td class="n" data-limit-rate="${n}/${perSeconds}" title="token bucket: ${n} per ${perSeconds} s, at most ${burst} at once">${n} / ${perSeconds} s (burst ${burst})</td>`;
}

function limitsTable(limits: LimitStatus[]): Html {
  if (limits.length === 0) return html`<p class="empty">No limits set (setLimit, or forge-jobs limits set).</p>`;
  return html`<table><thead><tr><th>Key</th><th class="n">Running</th><th class="n">Concurrency</th><th class="n">Rate</th><th class="n" title="ready jobs the limit or the rate holds back now">Throttled</th></tr></thead><tbody>${limits.map(
    (l) =>
      html`<tr data-limit="${l.key}"><td><code>${l.key}</code></td>${number(l.running, "running")}${concurrencyCell(l)}${rateCell(l)}${number(l.throttled, "throttled", true)}</tr>`,
  )}</tbody></table>`;
}

function waitCell(name: "p50" | "p95", ms: number | null): Html {
  return ms === null
    ? html`<td class="n zero" data-wait="${name}">—</td>`
    : html`<td class="n" data-wait="${name}" data-ms="${Math.round(ms)}">${formatDuration(ms)}</td>`;
}

function groupsTable(groups: GroupStatus[]): Html {
  return html`<table><thead><tr><th>Group</th><th class="n">Weight</th><th class="n">READY</th><th class="n">RUNNING</th><th class="n">Wait p50</th><th class="n">Wait p95</th></tr></thead><tbody>${groups.map(
    (g) =>
      html`<tr data-group="${g.group}"><td>${g.group}</td><td class="n" data-weight>${g.weight}</td>${number(g.ready, "ready")}${number(g.running, "running")}${waitCell("p50", g.waitP50Ms)}${waitCell("p95", g.waitP95Ms)}</tr>`,
  )}</tbody></table>`;
}

/**
 * Limits (a pattern's limit holds for each matching key; its running and throttled are summed
 * over them) and, when there are any, groups with their wait over the last five minutes.
 */
export function flowSections(flow: FlowOverview | null): Html {
  if (flow === null) return html``;
  const groups = flow.groups.length
    ? html`<section id="groups"><h2>Groups <small>(wait before start over the last 5 minutes)</small></h2>${groupsTable(flow.groups)}</section>`
    : html``;
  return html`<section id="limits"><h2>Limits</h2>${limitsTable(flow.limits)}</section>${groups}`;
}
