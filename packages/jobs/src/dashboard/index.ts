import type { IncomingMessage, ServerResponse } from "node:http";
import { cancelJob, retryJob } from "../maintenance/admin.js";
import { actOnMatching, bulkFilter, matchingJobIds, type BulkVerb } from "../maintenance/bulk.js";
import { adopt } from "./mount.js";
import { JobError } from "../base/errors.js";
import { flowOverview } from "../flow/flow-overview.js";
import { listJobsWhere } from "../reads/list.js";
import { jobAttempts } from "../reads/attempts.js";
import { readWorkers } from "../reads/workers.js";
import { lostWorkerIds, renderWorkers } from "./operators.js";
import { actOnSelection, readSelection } from "./selection.js";
import { readSearch, searchCondition } from "./search.js";
import { getJob, statusCounts } from "../reads/status.js";
import { checkTenant } from "../base/validate.js";
import { actOnSchedule, schedulesOverview } from "./schedules.js";
import { actOnQueue } from "./queue-actions.js";
import { Csrf } from "./csrf.js";
import { checkedForm, methodNotAllowed, redirectWithNotice, requestPath, safeDecode, send, sendError, takeNotice } from "./http.js";
import { filterQuery, readFilter, renderConfirm, renderJob, renderJobList, shownEdges } from "./jobs-pages.js";
import { waitsOverview } from "./waits.js";
import { streamJobEvents } from "./events.js";
import { dashboardSettings, type DashboardOptions } from "./options.js";
import { latestJobs, lostWorkerJobs, recentActivity, relatedJobs } from "./queries.js";
import type { Notice } from "./notices.js";
import { renderPage } from "./render.js";

export type { DashboardOptions } from "./options.js";

/** A plain Node handler: mount it in any framework. `next` (Express/Connect style) gets what is not ours. */
export type DashboardHandler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

const ACTION = /^\/jobs\/([1-9]\d{0,14})\/(retry|cancel)$/;
const JOB_PAGE = /^\/jobs\/([1-9]\d{0,14})$/;
const JOB_EVENTS = /^\/jobs\/([1-9]\d{0,14})\/events$/;
const BULK = /^\/bulk\/(retry|cancel)$/;
const SCHEDULE_ACTION = /^\/schedules\/([^/]+)\/(pause|resume|trigger)$/;
const QUEUE_ACTION = /^\/queues\/([^/]+)\/(pause|resume)$/;
/** Where a form may send the browser back to, under the dashboard: a job's page or a filtered list. */
const BACK = /^\/jobs(?:\/[1-9]\d{0,14}|\?[A-Za-z0-9%=&._~+*-]*)?$/;

/** The id is a valid one here, so a JobError from retryJob can only mean its dedup key is held. */
function retryRefused(error: unknown): Notice {
  if (error instanceof JobError) return "retry-held";
  throw error;
}

/**
 * The queue dashboard as a request handler: per-queue counts and wait times, a chart of the
 * last hour's throughput per queue, running jobs with progress, pending jobs, recent
 * failures, and retry / cancel actions (POST forms with a CSRF token, answered with a 303
 * back to the page); a job list with filters, a search box and selected-row actions, a page per
 * job with its attempts, and a workers page. Server-rendered HTML, no assets, no script.
 * It does no authentication: mount it behind your own.
 */
export function createDashboard(options: DashboardOptions): DashboardHandler {
  const { basePath, title, refreshSeconds, listLimit, progressMs } = dashboardSettings(options);
  const csrf = new Csrf(options.secret, basePath);
  const db = adopt(options.db);
  const scope = checkTenant(options.tenant, "createDashboard: tenant", "every tenant's jobs");
  const scoped = scope === null ? {} : { tenant: scope };

  async function page(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // The page only displays: on the read replica when the database has one (readUrl).
    const reads = db.forReading();
    const [queues, activity, flow, schedules, running, pending, failed, workers] = [
      await statusCounts({ db: reads, ...scoped }),
      scope === null ? await recentActivity(reads) : null,
      scope === null ? await flowOverview(reads) : null,
      scope === null ? await schedulesOverview(reads) : null,
      await latestJobs(reads, "running", listLimit, scope),
      await latestJobs(reads, "pending", listLimit, scope),
      await latestJobs(reads, "failed", listLimit, scope),
      await readWorkers(reads),
    ];
    const notice = takeNotice(req, res, basePath);
    const body = renderPage({
      title,
      basePath,
      refreshSeconds,
      csrfToken: csrf.issue(req, res),
      now: new Date(),
      queues,
      activity,
      flow,
      schedules,
      running,
      pending,
      failed,
      listLimit,
      lostWorkers: lostWorkerIds(workers),
      workersLink: scope === null,
      queueForms: scope === null,
      ...(notice ? { notice } : {}),
      // Waiting jobs and open batches span tenants: a tenant-scoped dashboard leaves them out.
      waits: scope === null ? await waitsOverview(reads) : null,
    });
    // Node leaves the body out of a HEAD response and keeps its Content-Length.
    send(res, 200, "text/html; charset=utf-8", body);
  }

  /** The filter of a page or form, inside the dashboard's tenant: another tenant's filter matches nothing. */
  function scopedFilter(params: URLSearchParams): ReturnType<typeof readFilter> | null {
    const filter = readFilter(params);
    if (scope === null) return filter;
    if (filter.tenant !== undefined && filter.tenant !== scope) return null;
    return { ...filter, tenant: scope };
  }

  async function jobList(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const filter = scopedFilter(url.searchParams);
    const cursor = url.searchParams.get("before");
    const before = cursor === null || cursor === "" ? undefined : Number(cursor);
    const text = url.searchParams.get("q")?.trim() ?? "";
    const search = readSearch(text, Boolean(db.settings.payloadCodec));
    const matching = filter === null || "error" in search ? null : { db, ...filter, limit: listLimit, ...(before === undefined ? {} : { before }) };
    const conditions = "search" in search && search.search !== null ? [searchCondition(search.search)] : [];
    const list = matching === null ? { jobs: [], next: null } : await listJobsWhere(matching, conditions);
    const running = list.jobs.filter((j) => j.status === "running").map((j) => j.id);
    const lost = running.length === 0 ? undefined : await lostWorkerJobs(db.forReading(), running, lostWorkerIds(await readWorkers(db.forReading())));
    const notice = takeNotice(req, res, basePath);
    const shown = filter ?? readFilter(url.searchParams);
    const model = { title, basePath, csrfToken: csrf.issue(req, res), filter: shown, search: text, before, list, lost, ...(notice ? { notice } : {}) };
    send(res, "error" in search ? 400 : 200, "text/html; charset=utf-8", renderJobList("error" in search ? { ...model, searchError: search.error } : model));
  }

  async function jobPage(req: IncomingMessage, res: ServerResponse, id: number): Promise<void> {
    const job = await getJob(id, { db, ...scoped });
    if (!job) return sendError(res, 404, "Not Found", `No job #${id}.`);
    const reads = db.forReading();
    const related = await relatedJobs(reads, shownEdges(job), scope);
    const attempts = await jobAttempts(reads, id, scope);
    // getJob read its steps: the section shows the waits of steps (a sleep, an event, a child),
    // not a wait on dependencies, which the related jobs already show.
    const steps = { steps: job.steps, waitingFor: job.waitingFor?.kind === "dependencies" ? null : job.waitingFor };
    // Running on a worker silent past its lease: the page says when the sweep takes it back.
    const holder = job.status === "running" ? attempts?.at(-1)?.worker : undefined;
    const lostUntil = holder && lostWorkerIds(await readWorkers(reads)).has(holder) && job.status === "running" ? job.lockedUntil : null;
    const notice = takeNotice(req, res, basePath);
    const model = { title, basePath, csrfToken: csrf.issue(req, res), job, related, attempts, steps, lostUntil, now: new Date() };
    send(res, 200, "text/html; charset=utf-8", renderJob({ ...model, ...(notice ? { notice } : {}) }));
  }

  async function confirm(req: IncomingMessage, res: ServerResponse, url: URL, verb: BulkVerb): Promise<void> {
    const filter = scopedFilter(url.searchParams);
    const chosen = bulkFilter(verb, filter ?? readFilter(url.searchParams));
    const count = filter === null ? 0 : (await matchingJobIds(db, chosen)).length;
    send(res, 200, "text/html; charset=utf-8", renderConfirm({ title, basePath, csrfToken: csrf.issue(req, res), verb, filter: chosen, count }));
  }

  async function bulk(req: IncomingMessage, res: ServerResponse, verb: BulkVerb): Promise<void> {
    const form = await checkedForm(req, res, csrf);
    if (form === null) return;
    const filter = scopedFilter(form);
    const outcome = filter === null ? { matched: 0, done: 0 } : await actOnMatching(db, verb, filter);
    const shown = bulkFilter(verb, filter ?? readFilter(form));
    redirectWithNotice(
      res,
      basePath,
      `${basePath}/jobs${filterQuery(shown)}`,
      verb === "retry" ? "bulk-retried" : "bulk-cancelled",
      outcome.done,
      outcome.matched,
    );
  }

  async function selected(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = await checkedForm(req, res, csrf);
    if (form === null) return;
    const { verb, ids } = readSelection(form);
    const back = form.get("back");
    const location = back !== null && BACK.test(back) ? `${basePath}${back}` : `${basePath}/jobs`;
    if (ids.length === 0) return redirectWithNotice(res, basePath, location, "selected-none", 0);
    const outcome = await actOnSelection(db, verb, ids, scope);
    redirectWithNotice(res, basePath, location, verb === "retry" ? "selected-retried" : "selected-cancelled", outcome.done, outcome.of, outcome.refused);
  }

  async function workersPage(res: ServerResponse): Promise<void> {
    const workers = await readWorkers(db.forReading());
    send(res, 200, "text/html; charset=utf-8", renderWorkers({ title, basePath, now: new Date(), workers }));
  }

  async function act(req: IncomingMessage, res: ServerResponse, target: number | string, verb: string): Promise<void> {
    const form = await checkedForm(req, res, csrf);
    if (form === null) return;
    let notice: Notice;
    let id = typeof target === "number" ? target : 0;
    if (typeof target === "string") [notice, id] = await actOnSchedule(db, target, verb);
    else if (verb === "retry") notice = await retryJob(id, { db, ...scoped }).then((retried) => (retried ? "retried" : "not-retried"), retryRefused);
    else notice = (await cancelJob(id, { db, ...scoped })) ? "cancelled" : "not-cancelled";
    // Back to the page the form was on (a job's, a list's), else the overview. The action's own query
    // string is dropped: an app may have put a secret there, and a redirect would copy it into the next
    // request's URL and so into the web server's log.
    const back = form.get("back");
    redirectWithNotice(res, basePath, back !== null && BACK.test(back) ? `${basePath}${back}` : basePath, notice, id);
  }

  function route(req: IncomingMessage, res: ServerResponse, url: URL, rest: string): Promise<void> | void {
    const get = req.method === "GET" || req.method === "HEAD";
    if (rest === "" || rest === "/" || rest === "/jobs") {
      if (!get) return methodNotAllowed(res, "GET, HEAD");
      return rest === "/jobs" ? jobList(req, res, url) : page(req, res);
    }
    if (rest === "/workers" && scope === null) return get ? workersPage(res) : methodNotAllowed(res, "GET, HEAD");
    if (rest === "/selected") return req.method === "POST" ? selected(req, res) : methodNotAllowed(res, "POST");
    const job = JOB_PAGE.exec(rest);
    if (job) return get ? jobPage(req, res, Number(job[1])) : methodNotAllowed(res, "GET, HEAD");
    const events = JOB_EVENTS.exec(rest);
    if (events) return get ? streamJobEvents(req, res, db, Number(events[1]), scope, progressMs) : methodNotAllowed(res, "GET, HEAD");
    const many = BULK.exec(rest);
    if (many)
      return get
        ? confirm(req, res, url, many[1] as BulkVerb)
        : req.method === "POST"
          ? bulk(req, res, many[1] as BulkVerb)
          : methodNotAllowed(res, "GET, HEAD, POST");
    const match = ACTION.exec(rest);
    if (match) {
      if (req.method !== "POST") return methodNotAllowed(res, "POST");
      return act(req, res, Number(match[1]), match[2]!);
    }
    const scheduleMatch = SCHEDULE_ACTION.exec(rest);
    // Schedules are the whole queue's: not acted on from a tenant's dashboard.
    if (scheduleMatch && scope === null) {
      if (req.method !== "POST") return methodNotAllowed(res, "POST");
      const name = safeDecode(scheduleMatch[1]!);
      if (name === null) return sendError(res, 404, "Not Found", "No such page.");
      return act(req, res, name, scheduleMatch[2]!);
    }
    const queueMatch = scope === null ? QUEUE_ACTION.exec(rest) : null;
    if (queueMatch) {
      const name = req.method === "POST" ? safeDecode(queueMatch[1]!) : null;
      if (name === null) return req.method === "POST" ? sendError(res, 404, "Not Found", "No such page.") : methodNotAllowed(res, "POST");
      return actOnQueue(req, res, { db, csrf, basePath }, name, queueMatch[2] as "pause" | "resume");
    }
    return sendError(res, 404, "Not Found", "No such page.");
  }

  async function handle(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): Promise<void> {
    const url = new URL(requestPath(req), "http://dashboard.invalid");
    const rest = url.pathname === basePath ? "" : url.pathname.startsWith(`${basePath}/`) ? url.pathname.slice(basePath.length) : null;
    if (rest === null) {
      if (next) return next();
      return sendError(res, 404, "Not Found", "No such page.");
    }
    try {
      await route(req, res, url, rest);
    } catch (error) {
      // A filter the queue refuses (a status that does not exist, a name too long): said as such.
      if (!(error instanceof JobError) || res.headersSent) throw error;
      sendError(res, 400, "Bad Request", error.message);
    }
  }

  return (req, res, next) => {
    handle(req, res, next).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy(error instanceof Error ? error : undefined);
      } else if (next) {
        next(error);
      } else {
        sendError(res, 500, "Internal Server Error", "The dashboard could not read the queue; see the server log.");
        // Nobody else will report it: the logger, when the application gave one.
        options.logger?.error({ err: error instanceof Error ? error.message : String(error) }, "forge-jobs dashboard: could not render");
      }
    });
  };
}
