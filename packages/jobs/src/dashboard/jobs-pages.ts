import type { BulkFilter, BulkVerb } from "../maintenance/bulk.js";
import type { JobList } from "../reads/list.js";
import { JOB_STATUSES as STATUSES, type Job } from "../base/types.js";
import { html, type Html } from "./escape.js";
import { withoutServerPaths } from "./paths.js";
import type { RelatedJob } from "./queries.js";
import { lostWorkerNote, when } from "./stamps.js";
import { attemptsSection } from "./operators.js";
import type { JobAttempt } from "../reads/attempts.js";
import type { JobSteps } from "../reads/steps.js";
import { stepsSection } from "./steps.js";
import { firstLine, formatAge, noticeHtml, progressBar, shell, type PageModel } from "./render.js";

// The job list (filters, pages, bulk actions), one job's page, and the bulk confirmation.
// Every read goes through listJobs / getJob and every action through retryJob / cancelJob,
// as the CLI's list, show, retry and cancel do.

const FILTER_FIELDS = ["queue", "status", "task", "tenant"] as const;

/** The filter in a page's query or a bulk form: empty fields are no filter. Values are checked by listJobs. */
export function readFilter(params: URLSearchParams): BulkFilter {
  const filter: Record<string, string> = {};
  for (const field of FILTER_FIELDS) {
    const value = params.get(field)?.trim();
    if (value) filter[field] = value;
  }
  return filter as BulkFilter;
}

/** "?queue=mails&status=failed" (or "" with no filter); `extra` appended (a page cursor). */
export function filterQuery(filter: BulkFilter, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams();
  for (const field of FILTER_FIELDS) if (filter[field] !== undefined) params.set(field, String(filter[field]));
  for (const [key, value] of Object.entries(extra)) params.set(key, value);
  const text = params.toString();
  return text ? `?${text}` : "";
}

function describeFilter(filter: BulkFilter): string {
  const parts = FILTER_FIELDS.filter((f) => filter[f] !== undefined).map((f) => `${f} ${String(filter[f])}`);
  return parts.length ? parts.join(", ") : "no filter";
}

export interface Forms {
  basePath: string;
  csrfToken: string;
}

/** A retry or cancel form for one job, coming back to `back` (a path under the dashboard). */
export function jobAction(forms: Forms, id: number, verb: "retry" | "cancel", back: string): Html {
  return html`<form method="post" action="${forms.basePath}/jobs/${id}/${verb}"><input type="hidden" name="csrf" value="${forms.csrfToken}"><input type="hidden" name="back" value="${back}"><button type="submit" data-action="${verb}" data-job="${id}">${verb === "retry" ? "Retry" : "Cancel"}</button></form>`;
}

export interface ListPageModel extends Forms {
  title: string;
  filter: BulkFilter;
  /** The search box's text (search.ts), "" for none. */
  search: string;
  /** Why the search could not be read; the list is then empty. */
  searchError?: string;
  /** Running jobs of the page whose worker is lost, with their lease's end (lostWorkerJobs). */
  lost?: ReadonlyMap<number, Date | null>;
  /** The page's cursor (`before`), when it is not the first page. */
  before: number | undefined;
  list: JobList;
  notice?: PageModel["notice"];
}

function filterForm(model: ListPageModel): Html {
  const { filter } = model;
  const search = html`<label>search<input name="q" type="search" value="${model.search}" size="34" placeholder="42, send-mail, timeout, payload.email=a@example.org"></label>`;
  const text = (field: "queue" | "task" | "tenant") => html`<label>${field}<input name="${field}" value="${filter[field] ?? ""}" size="14"></label>`;
  const options = STATUSES.map((s) => html`<option value="${s}"${filter.status === s ? html` selected` : ""}>${s}</option>`);
  return html`<form class="filters" method="get" action="${model.basePath}/jobs">${text("queue")}<label>status<select name="status"><option value="">any</option>${options}</select></label>${text("task")}${text("tenant")}${search}<button type="submit">Filter</button><a href="${model.basePath}/jobs">clear</a></form>`;
}

export function renderJobList(model: ListPageModel): string {
  const { basePath, filter, list } = model;
  const rows = list.jobs.map(
    (j) =>
      html`<tr id="job-${j.id}" data-job="${j.id}" data-status="${j.status}"><td><input type="checkbox" name="id" value="${j.id}" form="selection" aria-label="select job ${j.id}"></td><td class="n"><a href="${basePath}/jobs/${j.id}">${j.id}</a></td><td>${j.queue}</td><td>${j.task}</td><td data-state>${model.lost?.has(j.id) ? lostWorkerNote(model.lost.get(j.id) ?? null) : j.status}</td><td class="n">${j.attempts}/${j.maxAttempts}</td><td>${j.tenant ?? ""}</td><td>${when(j.createdAt)}</td><td><pre class="err">${j.lastError ? firstLine(j.lastError) : ""}</pre></td></tr>`,
  );
  const table =
    list.jobs.length === 0
      ? html`<p class="empty">No job matches.</p>`
      : html`<table id="jobs"><thead><tr><th></th><th class="n">#</th><th>Queue</th><th>Task</th><th>Status</th><th class="n">Attempts</th><th>Tenant</th><th>Created</th><th>Last error</th></tr></thead><tbody>${rows}</tbody></table>`;
  const q: Record<string, string> = model.search === "" ? {} : { q: model.search };
  const pages = html`<p class="pages">${model.before !== undefined ? html`<a data-page="first" href="${basePath}/jobs${filterQuery(filter, q)}">Newest</a> ` : ""}${
    list.next !== null ? html`<a data-page="next" href="${basePath}/jobs${filterQuery(filter, { ...q, before: String(list.next) })}">Older →</a>` : ""
  }</p>`;
  // The ticked rows' checkboxes belong to this form (their `form` attribute): no script, no nesting.
  const selection =
    list.jobs.length === 0
      ? ""
      : html`<form id="selection" class="actions" method="post" action="${basePath}/selected"><input type="hidden" name="csrf" value="${model.csrfToken}"><input type="hidden" name="back" value="/jobs${filterQuery(filter, q)}"><button type="submit" name="verb" value="retry" data-selected="retry">Retry selected</button><button type="submit" name="verb" value="cancel" data-selected="cancel">Cancel selected</button></form>`;
  const error = model.searchError === undefined ? "" : html`<p class="notice bad" role="alert" data-search-error>${model.searchError}</p>`;
  const bulk = html`<p class="actions"><a data-bulk="retry" href="${basePath}/bulk/retry${filterQuery(filter)}">Retry the ${filter.status ?? "failed"} jobs of this filter…</a> <a data-bulk="cancel" href="${basePath}/bulk/cancel${filterQuery(filter)}">Cancel the ${filter.status ?? "pending"} jobs of this filter…</a></p>`;
  return shell(model.title, "Jobs", basePath, html`${noticeHtml(model.notice)}${filterForm(model)}${error}${bulk}${selection}${table}${pages}`);
}

export interface ConfirmPageModel extends Forms {
  title: string;
  verb: BulkVerb;
  /** The filter as the action will run it (its default status filled in). */
  filter: BulkFilter;
  count: number;
}

/** The count and the confirmation of a bulk action: the POST form carries the filter, not the ids. */
export function renderConfirm(model: ConfirmPageModel): string {
  const { basePath, verb, filter, count } = model;
  const label = verb === "retry" ? "Retry" : "Cancel";
  const back = html`<a href="${basePath}/jobs${filterQuery(filter)}">Back to the list</a>`;
  const hidden = ["queue", "status", "task", "tenant"].map((f) =>
    filter[f as keyof BulkFilter] === undefined ? "" : html`<input type="hidden" name="${f}" value="${String(filter[f as keyof BulkFilter])}">`,
  );
  const main =
    count === 0
      ? html`<p class="empty" data-count="0">No job matches ${describeFilter(filter)}: nothing to ${verb}.</p><p>${back}</p>`
      : html`<p data-count="${count}">${label} <strong>${count}</strong> job(s) matching ${describeFilter(filter)}?</p><form method="post" action="${basePath}/bulk/${verb}"><input type="hidden" name="csrf" value="${model.csrfToken}">${hidden}<p class="actions"><button type="submit" data-confirm="${verb}">${label} ${count} job(s)</button> ${back}</p></form>`;
  return shell(model.title, `${label} jobs`, basePath, main);
}

export interface JobPageModel extends Forms {
  title: string;
  job: Job;
  now: Date;
  /** Task and status of the jobs in `job.dependsOn` and `job.dependents` (relatedJobs); without it they are listed by id alone. */
  related?: ReadonlyMap<number, RelatedJob>;
  /** Its attempts, first to latest (reads/attempts.ts); left out, the section is too. */
  attempts?: readonly JobAttempt[] | null;
  /** Its durable steps and what it waits for (reads/steps.ts); left out or empty, no section. */
  steps?: JobSteps | null;
  /** The job runs on a worker silent past its lease: when the sweep takes it back. */
  lostUntil?: Date | null;
  notice?: PageModel["notice"];
}

/** Per direction: a batch's callback or a fan-out source may have thousands of dependents. */
export const SHOWN_EDGES = 50;

/** The ids the page shows in each direction: what to pass to relatedJobs. */
export function shownEdges(job: Job): number[] {
  return [...job.dependsOn.slice(0, SHOWN_EDGES), ...job.dependents.slice(0, SHOWN_EDGES)];
}

function edges(model: JobPageModel, id: string, title: string, ids: readonly number[]): Html {
  if (ids.length === 0) return html``;
  const items = ids.slice(0, SHOWN_EDGES).map((n) => {
    const related = model.related?.get(n);
    const link = html`<a href="${model.basePath}/jobs/${n}">#${n}</a>`;
    return related
      ? html`<li data-job="${n}" data-status="${related.status}">${link} ${related.task} (${related.status})</li>`
      : html`<li data-job="${n}">${link}</li>`;
  });
  const more = ids.length > SHOWN_EDGES ? html`<p class="empty">and ${ids.length - SHOWN_EDGES} more</p>` : "";
  return html`<section id="${id}"><h2>${title}</h2><ul>${items}</ul>${more}</section>`;
}

function json(value: unknown): Html {
  return value === null || value === undefined ? html`<span class="zero">—</span>` : html`<pre>${JSON.stringify(value, null, 2)}</pre>`;
}

function seconds(from: Date | null, to: Date | null): string {
  return from === null || to === null ? "—" : formatAge((to.getTime() - from.getTime()) / 1000);
}

/** Everything about one job: payload, progress, result, attempts, last error (whole), timings. */
export function renderJob(model: JobPageModel): string {
  const { job, basePath, now } = model;
  const finishedAt = "finishedAt" in job ? job.finishedAt : null;
  const heartbeatAt = "heartbeatAt" in job ? job.heartbeatAt : null;
  const bar = progressBar(job.progress);
  const back = `/jobs/${job.id}`;
  const actions =
    job.status === "failed" || job.status === "cancelled"
      ? jobAction(model, job.id, "retry", back)
      : job.status === "pending" || job.status === "running" || job.status === "waiting"
        ? jobAction(model, job.id, "cancel", back)
        : "";
  const row = (term: string, value: Html | string | number) => html`<dt>${term}</dt><dd data-field="${term}">${value}</dd>`;
  const main = html`${noticeHtml(model.notice)}<dl class="job">${[
    row("status", model.lostUntil !== undefined && model.lostUntil !== null ? lostWorkerNote(model.lostUntil) : job.status),
    row("queue", job.queue),
    row("task", job.task),
    row("tenant", job.tenant ?? "—"),
    row("attempts", `${job.attempts} of ${job.maxAttempts}`),
    row("priority", job.priority),
    row("group", job.group ?? "—"),
    row("concurrency key", job.concurrencyKey ?? "—"),
    row("dedup key", job.dedupKey ?? "—"),
    row("created", when(job.createdAt)),
    row(
      "runs at",
      html`${when(job.runAt)}${job.status === "pending" && job.runAt > now ? ` (in ${formatAge((job.runAt.getTime() - now.getTime()) / 1000)})` : ""}`,
    ),
    row("started", when(job.startedAt)),
    row("heartbeat", when(heartbeatAt)),
    row("finished", when(finishedAt)),
    row("waited", seconds(job.runAt, job.startedAt)),
    row("ran", seconds(job.startedAt, finishedAt)),
    row("updated", when(job.updatedAt)),
  ]}</dl>
<div class="actions">${actions}</div>
<section id="payload"><h2>Payload</h2>${json(job.payload)}</section>
<section id="progress"><h2>Progress</h2>${bar ? html`<progress value="${bar.value}" max="${bar.max}"></progress>` : ""}${json(job.progress)}</section>
<section id="result"><h2>Result</h2>${json(job.result)}</section>
${model.attempts === undefined ? "" : attemptsSection(model.attempts, basePath)}
${model.steps === undefined ? "" : stepsSection(model.steps)}
<section id="last-error"><h2>Last error</h2>${job.lastError ? html`<pre class="err">${withoutServerPaths(job.lastError)}</pre>` : html`<span class="zero">—</span>`}</section>
${edges(model, "depends-on", "Depends on", job.dependsOn)}${edges(model, "dependents", "Dependents", job.dependents)}`;
  return shell(model.title, `Job #${job.id}`, basePath, main);
}
