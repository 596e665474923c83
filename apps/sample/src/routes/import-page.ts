import { createDashboard, type DashboardHandler } from "@forge/jobs/dashboard";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import type { AppDatabase } from "../db.js";
import { JobParams, OrgParams } from "../schemas.js";

/** Per-org streams kept at most: past it the map starts again (a handler is cheap to make). */
const MAX_ORGS = 1000;

/**
 * GET /orgs/:org/imports/new — a page to upload a CSV of contacts and watch its import: a
 * progress bar fed by the job's Server-Sent Events.
 *
 * GET /orgs/:org/jobs/:id/events — those events: @forge/jobs' dashboard stream
 * (`/jobs/:id/events`) of a dashboard scoped to the org (`tenant`), so another org's job is
 * "not found", as on GET /orgs/:org/jobs/:id. Only that path is routed to it, not the dashboard.
 */
export function importPageRoutes(app: FastifyInstance, db: AppDatabase, progressInterval?: number): void {
  const streams = new Map<string, DashboardHandler>();
  const streamOf = (org: string): DashboardHandler => {
    let handler = streams.get(org);
    if (!handler) {
      if (streams.size >= MAX_ORGS) streams.clear();
      handler = createDashboard({ db: db.jobs, basePath: `/orgs/${org}`, tenant: org, ...(progressInterval === undefined ? {} : { progressInterval }) });
      streams.set(org, handler);
    }
    return handler;
  };
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  typed.get(
    "/orgs/:org/jobs/:id/events",
    { schema: { summary: "A job's status and live progress, as Server-Sent Events", params: JobParams } },
    (request, reply) => {
      reply.hijack();
      streamOf(request.params.org)(request.raw, reply.raw);
    },
  );
  typed.get(
    "/orgs/:org/imports/new",
    { schema: { summary: "A page to import a CSV of contacts, with a live progress bar", params: OrgParams } },
    (request, reply) => reply.header("content-type", "text/html; charset=utf-8").send(importPage(request.params.org)),
  );
}

/** The org as a JS string literal inside <script>: `<` escaped, so no value can end the script. */
const scriptString = (value: string): string => JSON.stringify(value).replace(/</g, "\\u003c");

function importPage(org: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Import contacts</title>
<style>
  body { font: 16px system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; color: #222; }
  progress { width: 100%; height: 1.5rem; }
  #status { min-height: 1.5em; }
</style></head>
<body>
<h1>Import contacts</h1>
<form id="upload">
  <input type="file" name="file" accept=".csv,text/csv" required>
  <button type="submit">Import</button>
</form>
<p><progress id="bar" max="1" value="0"></progress> <span id="percent">0%</span></p>
<p id="status" role="status">Choose a CSV file (columns email, name, age).</p>
<script>
const org = ${scriptString(org)};
const form = document.getElementById("upload");
const bar = document.getElementById("bar");
const percent = document.getElementById("percent");
const status = document.getElementById("status");
const fraction = (p) => (p && p.totalBytes ? Math.min(1, p.bytes / p.totalBytes) : 0);
function show(value, text) {
  bar.value = value;
  percent.textContent = Math.floor(value * 100) + "%";
  status.textContent = text;
}
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  form.querySelector("button").disabled = true;
  show(0, "Uploading…");
  const response = await fetch("/orgs/" + encodeURIComponent(org) + "/imports", { method: "POST", body: new FormData(form) });
  const answer = await response.json();
  if (response.status !== 202) return show(0, answer.detail || "The upload was refused.");
  document.body.dataset.job = answer.jobId;
  show(0, "Waiting for a worker…");
  const events = new EventSource("/orgs/" + encodeURIComponent(org) + "/jobs/" + answer.jobId + "/events");
  events.addEventListener("job", (message) => {
    const job = JSON.parse(message.data);
    const p = job.liveProgress;
    if (job.status === "running" && p) show(fraction(p), "Read " + p.read.toLocaleString("en") + " of about " + (p.estimatedTotal || 0).toLocaleString("en") + " rows");
  });
  events.addEventListener("end", (message) => {
    events.close();
    const job = JSON.parse(message.data);
    document.body.dataset.state = job.status;
    if (job.status === "done") show(1, "Imported " + job.result.imported.toLocaleString("en") + " of " + job.result.read.toLocaleString("en") + " rows (" + job.result.rejected + " rejected)");
    else show(bar.value, "The import " + job.status + ": " + String(job.lastError || "").split("\\n")[0]);
  });
});
</script>
</body></html>`;
}
