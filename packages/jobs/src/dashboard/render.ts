import type { QueueStatus } from "../base/types.js";
import { chartLegend, throughputChart, waitCells } from "./chart.js";
import type { FlowOverview } from "../flow/flow-overview.js";
import { html, shortJson, type Html } from "./escape.js";
import { flowSections } from "./flow.js";
import { withoutServerPaths } from "./paths.js";
import type { ScheduleStatus } from "../schedules/schedules.js";
import { schedulesSection } from "./schedules.js";
import { queueStateCells, type QueueForms } from "./queues.js";
import { waitsSection, type WaitsOverview } from "./waits.js";
import { NOTICE_TEXT, type Notice } from "./notices.js";
import { lostWorkerNote } from "./stamps.js";
import type { JobSummary, RecentActivity } from "./queries.js";

export interface PageModel {
  title: string;
  basePath: string;
  refreshSeconds: number;
  csrfToken: string;
  now: Date;
  queues: QueueStatus[];
  /** Throughput per minute and wait times over the last hour, by the database clock; null on a tenant-scoped dashboard. */
  activity: RecentActivity | null;
  /** Limits and groups; null on a schema without flow control. */
  flow: FlowOverview | null;
  /** Recurring schedules; null on a schema without them. */
  schedules: ScheduleStatus[] | null;
  running: JobSummary[];
  pending: JobSummary[];
  failed: JobSummary[];
  listLimit: number;
  /** Workers silent past their lease (reads/workers.ts): their running jobs say so. */
  lostWorkers?: ReadonlySet<string>;
  /** Pause / resume forms per queue (not on a tenant-scoped dashboard: a pause is the whole queue's). */
  queueForms?: boolean;
  /** Link the workers page (not on a tenant-scoped dashboard: workers serve every tenant). */
  workersLink?: boolean;
  notice?: { kind: Notice; job: number; of?: number; refused?: number[] };
  /** Waiting jobs and open batches (waits.ts); null on a schema without them. */
  waits?: WaitsOverview | null;
}

/** Progress that a bar can show: numeric done/total, read/estimatedTotal or line/totalLines. */
export function progressBar(progress: unknown): { value: number; max: number } | null {
  if (typeof progress !== "object" || progress === null) return null;
  const p = progress as Record<string, unknown>;
  for (const [value, max] of [
    ["done", "total"],
    ["read", "estimatedTotal"],
    ["line", "totalLines"],
  ] as const) {
    const v = p[value];
    const m = p[max];
    if (typeof v === "number" && typeof m === "number" && Number.isFinite(v) && Number.isFinite(m) && m > 0) {
      return { value: Math.min(Math.max(v, 0), m), max: m };
    }
  }
  return null;
}

/** 42 → "42s", 3725 → "1h 2m": coarse on purpose, the page refreshes. */
export function formatAge(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

/** An error's first line (its message); the job page shows the whole text. */
export function firstLine(text: string): string {
  return withoutServerPaths(text.split("\n")[0]!);
}

function since(date: Date | null, now: Date): string {
  return date === null ? "—" : `${formatAge((now.getTime() - date.getTime()) / 1000)} ago`;
}

const STYLE = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:12px 20px}header h1{font-size:18px;margin:0}header p{margin:2px 0 0;color:#aab2c0;font-size:12px}
main{padding:16px 20px;max-width:1400px}section{margin-bottom:24px}h2{font-size:15px;margin:0 0 8px}
table{border-collapse:collapse;width:100%;background:#fff;box-shadow:0 1px 2px #0002}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e6e8ec;vertical-align:top}th{font-size:12px;color:#5b6475;background:#fafbfc}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.zero{color:#b7bdc8}.bad{color:#b3261e;font-weight:600}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre-wrap;word-break:break-all;margin:0}
pre.err{color:#b3261e;max-height:10em;overflow:auto}
progress{width:140px;vertical-align:middle}.pct{margin-left:6px;font-variant-numeric:tabular-nums}
form{margin:0}button{font:inherit;padding:2px 10px;border:1px solid #8a93a3;border-radius:4px;background:#fff;cursor:pointer}
button:hover{background:#eef0f3}.notice{background:#e7f3ea;border:1px solid #9ccaa6;padding:8px 12px;margin-bottom:16px}
.empty{color:#7a8394;font-style:italic;padding:8px 0}a{color:#1f4fbf}a.back{color:#aab2c0}
.filters{display:flex;gap:8px;flex-wrap:wrap;align-items:end;margin-bottom:12px}.filters label{display:flex;flex-direction:column;font-size:12px;color:#5b6475}
dl.job{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;background:#fff;padding:12px;box-shadow:0 1px 2px #0002}dl.job dt{color:#5b6475}dl.job dd{margin:0}
.actions{display:flex;gap:8px;margin:12px 0}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:12px}
figure{margin:0;padding:8px 10px;background:#fff;box-shadow:0 1px 2px #0002}figcaption{font-size:13px;margin-bottom:4px}
svg.chart text{font-size:10px;fill:#5b6475}.legend{margin:0 0 8px;font-size:12px}.legend svg{vertical-align:-1px;margin-left:6px}
`;

function count(n: number, kind: string, alarm = false): Html {
  return html`<td class="n${n === 0 ? " zero" : alarm ? " bad" : ""}" data-count="${kind}">${n}</td>`;
}

function queuesTable(queues: QueueStatus[], activity: RecentActivity | null, basePath: string, forms: QueueForms | null): Html {
  if (queues.length === 0) return html`<p class="empty">No jobs yet.</p>`;
  return html`<table id="queues"><thead><tr><th>Queue</th><th class="n">PENDING</th><th class="n">WAITING</th><th class="n">RUNNING</th><th class="n">FAILED</th><th class="n">DONE</th><th class="n">READY</th><th class="n">Oldest ready</th><th class="n">Wait p50</th><th class="n">Wait p95</th><th>State</th>${forms ? html`<th></th>` : ""}</tr></thead><tbody>${queues.map(
    (q) =>
      html`<tr data-queue="${q.queue}"><td><a href="${basePath}/jobs?queue=${encodeURIComponent(q.queue)}">${q.queue}</a></td>${count(q.counts.pending, "pending")}${count(q.counts.waiting, "waiting")}${count(q.counts.running, "running")}${count(q.counts.failed, "failed", true)}${count(q.counts.done, "done")}${count(q.ready, "ready")}<td class="n" data-age>${formatAge(q.oldestReadyAge)}</td>${waitCells(activity?.waits.get(q.queue))}${queueStateCells(q, forms)}</tr>`,
  )}</tbody></table>`;
}

/** A chart per queue: every queue of the table, and any that only the chart's query saw. */
function activitySection(queues: QueueStatus[], activity: RecentActivity | null): Html {
  if (activity === null) return html``;
  const names = [...new Set([...queues.map((q) => q.queue), ...activity.throughput.keys()])].sort((a, b) => a.localeCompare(b));
  if (names.length === 0) return html``;
  return html`<section id="activity"><h2>Last hour</h2>${chartLegend()}<div class="charts">${names.map(
    (queue) =>
      html`<figure data-queue="${queue}"><figcaption>${queue}</figcaption>${throughputChart(queue, activity.throughput.get(queue), activity.nowMinute)}</figure>`,
  )}</div></section>`;
}

function action(model: PageModel, job: JobSummary, verb: "retry" | "cancel"): Html {
  return html`<form method="post" action="${model.basePath}/jobs/${job.id}/${verb}"><input type="hidden" name="csrf" value="${model.csrfToken}"><button type="submit" data-action="${verb}" data-job="${job.id}">${verb === "retry" ? "Retry" : "Cancel"}</button></form>`;
}

function progressCell(progress: unknown): Html {
  const bar = progressBar(progress);
  if (bar) {
    const pct = Math.round((bar.value / bar.max) * 100);
    return html`<progress value="${bar.value}" max="${bar.max}" title="${shortJson(progress)}"></progress><span class="pct">${pct}%</span>`;
  }
  return progress === null ? html`<span class="zero">—</span>` : html`<code>${shortJson(progress)}</code>`;
}

function jobCells(job: JobSummary, basePath: string): Html {
  return html`<td class="n"><a href="${basePath}/jobs/${job.id}">${job.id}</a></td><td>${job.queue}</td><td>${job.task}</td><td class="n">${job.attempts}/${job.maxAttempts}</td>`;
}

function list(model: PageModel, id: string, title: string, jobs: JobSummary[], head: Html, row: (job: JobSummary) => Html): Html {
  const limit = model.listLimit;
  const note = jobs.length >= limit ? ` (latest ${limit})` : ` (${jobs.length})`;
  return html`<section id="${id}"><h2>${title}${note}</h2>${
    jobs.length === 0
      ? html`<p class="empty">None.</p>`
      : html`<table><thead><tr><th class="n">#</th><th>Queue</th><th>Task</th><th class="n">Attempts</th>${head}</tr></thead><tbody>${jobs.map(
          (job) => html`<tr id="job-${job.id}" data-job="${job.id}" data-status="${job.status}">${jobCells(job, model.basePath)}${row(job)}</tr>`,
        )}</tbody></table>`
  }</section>`;
}

/** What an action did, as the next page shows it. */
export function noticeHtml(notice: PageModel["notice"]): Html | "" {
  return notice ? html`<p class="notice" role="status">${NOTICE_TEXT[notice.kind](notice.job, notice.of ?? 0, notice.refused ?? [])}</p>` : "";
}

/** A page other than the overview (job list, job, confirmation): the same head and style, a way back. */
export function shell(title: string, heading: string, basePath: string, main: Html): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${heading} — ${title}</title><style>${STYLE}</style></head>
<body><header><h1>${heading}</h1><p><a class="back" href="${basePath}">${title}</a></p></header>
<main>${main}</main></body></html>`.text;
}

export function renderPage(model: PageModel): string {
  const { now } = model;
  const refresh = model.refreshSeconds > 0 ? html`<meta http-equiv="refresh" content="${model.refreshSeconds}">` : "";
  const notice = noticeHtml(model.notice);
  const page = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">${refresh}
<title>${model.title}</title><style>${STYLE}</style></head>
<body><header><h1>${model.title}</h1><p>${model.refreshSeconds > 0 ? `Refreshes every ${model.refreshSeconds} s · ` : ""}generated ${now.toISOString()}${model.workersLink ? html` · <a class="back" href="${model.basePath}/workers">Workers</a>` : ""} · <a class="back" href="${model.basePath}/jobs">Jobs</a></p></header>
<main>${notice}
<section><h2>Queues</h2>${queuesTable(model.queues, model.activity, model.basePath, model.queueForms ? model : null)}</section>
${activitySection(model.queues, model.activity)}
${flowSections(model.flow)}
${schedulesSection(model.schedules, model)}
${waitsSection(model.waits)}
${list(
  model,
  "running",
  "Running",
  model.running,
  html`<th>State</th><th>Progress</th><th>Heartbeat</th><th>Worker</th><th></th>`,
  (job) =>
    html`<td data-state>${job.lockedBy !== null && model.lostWorkers?.has(job.lockedBy) ? lostWorkerNote(job.lockedUntil) : "running"}</td><td>${progressCell(job.progress)}</td><td>${since(job.heartbeatAt, now)}</td><td><code>${job.lockedBy ?? ""}</code></td><td>${action(model, job, "cancel")}</td>`,
)}
${list(
  model,
  "pending",
  "Pending",
  model.pending,
  html`<th>Runs</th><th>Payload</th><th>Last error</th><th></th>`,
  // A job waiting for its retry shows why its last attempt failed.
  (job) =>
    html`<td>${job.runAt && job.runAt > now ? `in ${formatAge((job.runAt.getTime() - now.getTime()) / 1000)}` : "ready"}</td><td><code>${shortJson(job.payload)}</code></td><td>${job.lastError ? html`<pre class="err">${firstLine(job.lastError)}</pre>` : ""}</td><td>${action(model, job, "cancel")}</td>`,
)}
${list(
  model,
  "failures",
  "Recent failures",
  model.failed,
  html`<th>Failed</th><th>Last error</th><th>Payload</th><th></th>`,
  (job) =>
    html`<td>${since(job.finishedAt, now)}</td><td><pre class="err">${job.lastError ? withoutServerPaths(job.lastError) : ""}</pre></td><td><code>${shortJson(job.payload)}</code></td><td>${action(model, job, "retry")}</td>`,
)}
</main></body></html>`;
  return page.text;
}
