import type { JobAttempt } from "../reads/attempts.js";
import type { WorkerStatus } from "../reads/workers.js";
import { html, type Html } from "./escape.js";
import { withoutServerPaths } from "./paths.js";
import { formatAge, shell } from "./render.js";
import { when } from "./stamps.js";

// The operator's views beside the jobs: the workers page and a job's attempts.

/** The ids of the workers silent past their lease. */
export function lostWorkerIds(workers: readonly WorkerStatus[]): Set<string> {
  return new Set(workers.filter((w) => w.lost).map((w) => w.id));
}

export interface WorkersPageModel {
  title: string;
  basePath: string;
  now: Date;
  workers: WorkerStatus[];
}

/** `basePath/workers`: each worker, its host, queues, concurrency, last heartbeat and the jobs it holds; lost ones in red. */
export function renderWorkers(model: WorkersPageModel): string {
  const { basePath, now, workers } = model;
  const rows = workers.map((w) => {
    const state = w.lost
      ? html`<span class="bad">lost: silent past its ${w.lease}s lease</span>`
      : w.host === null
        ? html`<span class="zero">not registered</span>`
        : "alive";
    const heard = w.lastHeartbeatAt === null ? "—" : `${formatAge((now.getTime() - w.lastHeartbeatAt.getTime()) / 1000)} ago`;
    const held =
      w.jobsHeld === 0
        ? html`<span class="zero">0</span>`
        : html`<a href="${basePath}/jobs?status=running&q=${encodeURIComponent(`worker:${w.id}`)}">${w.jobsHeld}</a>`;
    return html`<tr data-worker="${w.id}" data-lost="${String(w.lost)}"><td><code>${w.id}</code></td><td>${w.host ?? "—"}${w.pid === null ? "" : html` <span class="zero">pid ${w.pid}</span>`}</td><td>${w.queues.join(", ")}</td><td class="n">${w.concurrency ?? "—"}</td><td data-heartbeat>${when(w.lastHeartbeatAt)} <span class="zero">${heard}</span></td><td class="n" data-count="held">${held}</td><td data-state>${state}</td></tr>`;
  });
  const main =
    workers.length === 0
      ? html`<p class="empty">No worker is registered and no job is running.</p>`
      : html`<table id="workers"><thead><tr><th>Worker</th><th>Host</th><th>Queues</th><th class="n">Concurrency</th><th>Last heartbeat</th><th class="n">Jobs held</th><th>State</th></tr></thead><tbody>${rows}</tbody></table>`;
  return shell(model.title, "Workers", basePath, main);
}

/** A job's attempts, first to latest: start, end, worker and the error that ended each. */
export function attemptsSection(attempts: readonly JobAttempt[] | null, basePath: string): Html {
  if (attempts === null || attempts.length === 0) return html`<section id="attempts"><h2>Attempts</h2><p class="empty">Not started yet.</p></section>`;
  const rows = attempts.map(
    (a) =>
      html`<tr data-attempt="${a.attempt}"${a.latest ? html` data-latest="true"` : ""}><td class="n">${a.attempt}</td><td>${when(a.startedAt)}</td><td>${when(a.endedAt)}</td><td>${
        a.worker === null ? "—" : html`<a href="${basePath}/workers"><code>${a.worker}</code></a>`
      }</td><td>${a.error === null ? html`<span class="zero">—</span>` : html`<pre class="err">${withoutServerPaths(a.error)}</pre>`}</td></tr>`,
  );
  return html`<section id="attempts"><h2>Attempts</h2><table><thead><tr><th class="n">#</th><th>Started</th><th>Ended</th><th>Worker</th><th>Error</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}
