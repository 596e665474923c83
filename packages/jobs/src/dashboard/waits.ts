import type { JobsDatabase } from "../core/database.js";
import { eachStore, storesOf } from "../core/stores.js";
import { isMissingTable } from "../flow/flow-overview.js";
import { html, type Html } from "./escape.js";

// The "Waiting" panel: jobs waiting on their dependencies, each with its dependencies and
// their states, and the batches not finished yet, with their items counted by state and the
// callback's state. Nothing at all on a schema older than dependencies (`null`).

const SHOWN = 20;

export interface WaitingFlowJob {
  id: number;
  task: string;
  queue: string;
  dependencies: { id: number; task: string; status: string }[];
}

export interface OpenBatch {
  id: number;
  total: number;
  callback: { id: number; task: string; status: string } | null;
  /** Items by state. */
  counts: Record<string, number>;
}

export interface WaitsOverview {
  waiting: WaitingFlowJob[];
  batches: OpenBatch[];
}

/** The newest waiting jobs and open batches, or null on a schema without them. */
export async function waitsOverview(db: JobsDatabase): Promise<WaitsOverview | null> {
  try {
    return { waiting: await waitingJobs(db), batches: await openBatches(db) };
  } catch (error) {
    if (isMissingTable(error)) return null;
    throw error;
  }
}

async function waitingJobs(db: JobsDatabase): Promise<WaitingFlowJob[]> {
  const { rows } = await db.executor.query<{ id: number | string; task: string; queue: string }>(
    `SELECT id, task, queue FROM ${db.table} WHERE status = 'waiting' AND on_dependency_failure IS NOT NULL ORDER BY id DESC LIMIT ${SHOWN}`,
  );
  const jobs = rows.map((r) => ({ id: Number(r.id), task: r.task, queue: r.queue, dependencies: [] as WaitingFlowJob["dependencies"] }));
  if (jobs.length === 0) return jobs;
  // A dependency that ended is in history (or, not yet upgraded, in the live table): a join per table.
  const edge = (table: string) => `SELECT e.job_id, d.id, d.task, d.status FROM ${db.dependenciesTable} e JOIN ${table} d ON d.id = e.depends_on_id
     WHERE ${db.sql.inList("e.job_id", "$1")}`;
  const edges = await db.executor.query<{ job_id: number | string; id: number | string; task: string; status: string }>(
    `SELECT * FROM (${eachStore(edge, storesOf(db))}) AS u ORDER BY job_id, id`,
    [jobs.map((j) => j.id)],
  );
  const byId = new Map(jobs.map((j) => [j.id, j]));
  for (const e of edges.rows) byId.get(Number(e.job_id))?.dependencies.push({ id: Number(e.id), task: e.task, status: e.status });
  return jobs;
}

async function openBatches(db: JobsDatabase): Promise<OpenBatch[]> {
  const { rows } = await db.executor.query<{
    id: number | string;
    total: number | string;
    callback_id: number | string | null;
    task: string | null;
    status: string | null;
  }>(
    // The callback in either table (a cancelled one is in history): one probe of each by id.
    `SELECT b.id, b.total, b.callback_id, COALESCE(c.task, h.task) AS task, COALESCE(c.status, h.status) AS status FROM ${db.batchesTable} b
     LEFT JOIN ${db.table} c ON c.id = b.callback_id LEFT JOIN ${db.historyTable} h ON h.id = b.callback_id
     WHERE b.finished_at IS NULL ORDER BY b.id DESC LIMIT ${SHOWN}`,
  );
  const batches = rows.map((r) => ({
    id: Number(r.id),
    total: Number(r.total),
    callback: r.callback_id === null ? null : { id: Number(r.callback_id), task: r.task ?? "?", status: r.status ?? "pruned" },
    counts: {} as Record<string, number>,
  }));
  if (batches.length === 0) return batches;
  // Counted per table and added up: each count reads its table's (batch_id, id) index.
  const counts = await db.executor.query<{ batch_id: number | string; status: string; n: number | string }>(
    eachStore(
      (table) => `SELECT batch_id, status, count(*) AS n FROM ${table} WHERE ${db.sql.inList("batch_id", "$1")} GROUP BY batch_id, status`,
      storesOf(db),
    ),
    [batches.map((b) => b.id)],
  );
  const byId = new Map(batches.map((b) => [b.id, b]));
  for (const c of counts.rows) {
    const batch = byId.get(Number(c.batch_id));
    if (batch) batch.counts[c.status] = (batch.counts[c.status] ?? 0) + Number(c.n);
  }
  return batches;
}

const STATES = ["pending", "running", "waiting", "done", "failed", "cancelled"];

export function waitsSection(waits: WaitsOverview | null | undefined): Html {
  if (!waits || (waits.waiting.length === 0 && waits.batches.length === 0)) return html``;
  const jobs =
    waits.waiting.length === 0
      ? html``
      : html`<table><thead><tr><th>Job</th><th>Task</th><th>Queue</th><th>Waits for</th></tr></thead><tbody>${waits.waiting.map(
          (j) =>
            html`<tr data-waiting="${j.id}"><td>#${j.id}</td><td>${j.task}</td><td>${j.queue}</td><td>${j.dependencies.map(
              (d) => html`<span class="dep" data-dependency="${d.id}" data-status="${d.status}">#${d.id} ${d.task} (${d.status})</span> `,
            )}</td></tr>`,
        )}</tbody></table>`;
  const batches =
    waits.batches.length === 0
      ? html``
      : html`<table><thead><tr><th>Batch</th><th>Items</th>${STATES.map((s) => html`<th>${s}</th>`)}<th>Callback</th></tr></thead><tbody>${waits.batches.map(
          (b) =>
            html`<tr data-batch="${b.id}"><td>${b.id}</td><td>${b.total}</td>${STATES.map((s) => html`<td data-count="${s}">${b.counts[s] ?? 0}</td>`)}<td>${
              b.callback ? html`#${b.callback.id} ${b.callback.task} (${b.callback.status})` : html`<span class="zero">—</span>`
            }</td></tr>`,
        )}</tbody></table>`;
  return html`<section id="waiting"><h2>Waiting: dependencies and batches</h2>${jobs}${batches}</section>`;
}
