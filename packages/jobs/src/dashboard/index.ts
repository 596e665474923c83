import type { IncomingMessage, ServerResponse } from "node:http";
import { cancelJob, retryJob } from "../admin.js";
import { resolveDb, type DbLike } from "../connect.js";
import { JobsDatabase } from "../db/database.js";
import { JobError } from "../errors.js";
import { flowOverview } from "../flow-overview.js";
import { pauseSchedule, readSchedule, resumeSchedule, triggerSchedule } from "../schedules.js";
import { statusCounts } from "../status.js";
import { schedulesOverview } from "./schedules.js";
import { escapeHtml } from "./escape.js";
import { CSRF_FIELD, Csrf, readCookie } from "./csrf.js";
import { latestJobs, recentActivity } from "./queries.js";
import { NOTICES, renderPage, type Notice } from "./render.js";
import type { Logger } from "../logger.js";

export interface DashboardOptions {
  /** The queue database (from `connect()`, or a pool). */
  db: DbLike;
  /** Where the handler is mounted, e.g. "/admin/jobs": links, form actions and the cookie path. */
  basePath: string;
  /** Page title. Default "Forge jobs". */
  title?: string;
  /** Seconds between automatic reloads (`<meta http-equiv="refresh">`); 0 = never. Default 5. */
  refreshSeconds?: number;
  /** Rows per list (running, pending, failures). Default 20, at most 100. */
  listLimit?: number;
  /**
   * Signs the CSRF tokens. Default: random per process — set one (16+ bytes) when several
   * processes serve the dashboard behind one address, so a form rendered by one is accepted by another.
   */
  secret?: string | Buffer;
  /** Where a failure to read the queue is reported when no `next` handler takes it. Default silent. */
  logger?: Logger;
}

/** A plain Node handler: mount it in any framework. `next` (Express/Connect style) gets what is not ours. */
export type DashboardHandler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

/** What an action did, shown once by the next page load (a flash cookie: a reload does not repeat it). */
const NOTICE_COOKIE = "forge_jobs_notice";
const MAX_FORM_BYTES = 4096;
const ACTION = /^\/jobs\/([1-9]\d{0,14})\/(retry|cancel)$/;
const SCHEDULE_ACTION = /^\/schedules\/([^/]+)\/(pause|resume|trigger)$/;

/** The id is a valid one here, so a JobError from retryJob can only mean its dedup key is held. */
function retryRefused(error: unknown): Notice {
  if (error instanceof JobError) return "retry-held";
  throw error;
}

const SECURITY_HEADERS: Record<string, string> = {
  // No script at all on the page: even a value that escaped escaping could not run.
  "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  // The page URL may carry an access token (?token=): never send it elsewhere.
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-store",
};

/**
 * The queue dashboard as a request handler: per-queue counts and wait times, a chart of the
 * last hour's throughput per queue, running jobs with progress, pending jobs, recent
 * failures, and retry / cancel actions (POST forms with a CSRF token, answered with a 303
 * back to the page). Server-rendered HTML, no assets, no script.
 * It does no authentication: mount it behind your own.
 */
export function createDashboard(options: DashboardOptions): DashboardHandler {
  const basePath = normaliseBasePath(options.basePath);
  const title = options.title ?? "Forge jobs";
  const refreshSeconds = options.refreshSeconds ?? 5;
  if (!Number.isInteger(refreshSeconds) || refreshSeconds < 0) {
    throw new TypeError(`createDashboard: refreshSeconds must be a whole number of seconds >= 0, got ${String(options.refreshSeconds)}`);
  }
  const listLimit = options.listLimit ?? 20;
  if (!Number.isInteger(listLimit) || listLimit < 1 || listLimit > 100) {
    throw new TypeError(`createDashboard: listLimit must be an integer from 1 to 100, got ${String(options.listLimit)}`);
  }
  const csrf = new Csrf(options.secret, basePath);
  const db = adopt(options.db);

  async function page(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const [queues, activity, flow, schedules, running, pending, failed] = [
      await statusCounts({ db }),
      await recentActivity(db),
      await flowOverview(db),
      await schedulesOverview(db),
      await latestJobs(db, "running", listLimit),
      await latestJobs(db, "pending", listLimit),
      await latestJobs(db, "failed", listLimit),
    ];
    const notice = readNotice(req);
    if (notice !== undefined) res.appendHeader("Set-Cookie", `${NOTICE_COOKIE}=; Path=${basePath}; Max-Age=0; HttpOnly; SameSite=Strict`);
    const body = renderPage({
      title,
      basePath,
      query: url.search,
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
      ...(notice ? { notice } : {}),
    });
    // Node leaves the body out of a HEAD response and keeps its Content-Length.
    send(res, 200, "text/html; charset=utf-8", body);
  }

  async function act(req: IncomingMessage, res: ServerResponse, url: URL, target: number | string, verb: string): Promise<void> {
    const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/x-www-form-urlencoded") {
      return sendError(res, 415, "Unsupported Media Type", "Actions are HTML form posts (application/x-www-form-urlencoded).");
    }
    const form = await readForm(req);
    if (form === null) return sendError(res, 413, "Payload Too Large", "This form is larger than any the dashboard sends.");
    if (!csrf.verify(req, form.get(CSRF_FIELD) ?? undefined)) {
      return sendError(res, 403, "Forbidden", "The form's security token is missing or does not match: reload the dashboard and try again.");
    }
    let notice: Notice;
    let id = typeof target === "number" ? target : 0;
    if (typeof target === "string") [notice, id] = await actOnSchedule(db, target, verb);
    else if (verb === "retry") notice = await retryJob(id, { db }).then((retried) => (retried ? "retried" : "not-retried"), retryRefused);
    else notice = (await cancelJob(id, { db })) ? "cancelled" : "not-cancelled";
    res.statusCode = 303;
    // Back to the page, with its query (an access token…) as it was.
    res.setHeader("Location", `${basePath}${url.search}`);
    res.appendHeader("Set-Cookie", `${NOTICE_COOKIE}=${notice}.${id}; Path=${basePath}; Max-Age=60; HttpOnly; SameSite=Strict`);
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    res.end();
  }

  async function handle(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): Promise<void> {
    const url = new URL(requestPath(req), "http://dashboard.invalid");
    const rest = url.pathname === basePath ? "" : url.pathname.startsWith(`${basePath}/`) ? url.pathname.slice(basePath.length) : null;
    if (rest === null) {
      if (next) return next();
      return sendError(res, 404, "Not Found", "No such page.");
    }
    if (rest === "" || rest === "/") {
      if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowed(res, "GET, HEAD");
      return page(req, res, url);
    }
    const match = ACTION.exec(rest);
    if (match) {
      if (req.method !== "POST") return methodNotAllowed(res, "POST");
      return act(req, res, url, Number(match[1]), match[2]!);
    }
    const scheduleMatch = SCHEDULE_ACTION.exec(rest);
    if (scheduleMatch) {
      if (req.method !== "POST") return methodNotAllowed(res, "POST");
      const name = safeDecode(scheduleMatch[1]!);
      if (name === null) return sendError(res, 404, "Not Found", "No such page.");
      return act(req, res, url, name, scheduleMatch[2]!);
    }
    return sendError(res, 404, "Not Found", "No such page.");
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

/** A schedule's pause, resume or run-now; the notice and, for a run, its job id. */
async function actOnSchedule(db: JobsDatabase, name: string, verb: string): Promise<[Notice, number]> {
  if (verb === "trigger") {
    if ((await readSchedule(db, name)) === null) return ["schedule-missing", 0];
    return ["schedule-triggered", await triggerSchedule(name, { db })];
  }
  const done = verb === "pause" ? await pauseSchedule(name, { db }) : await resumeSchedule(name, { db });
  return [done ? (verb === "pause" ? "schedule-paused" : "schedule-resumed") : "schedule-missing", 0];
}

function safeDecode(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/**
 * A JobsDatabase from another copy of this module (the CommonJS build bundles each entry
 * point on its own) fails `instanceof`; wrap its executor in this copy's class instead.
 */
function adopt(db: DbLike): JobsDatabase {
  if (db instanceof JobsDatabase) return db;
  const like = db as Partial<JobsDatabase>;
  if (like && typeof like === "object" && like.executor && like.settings && typeof like.table === "string") {
    return new JobsDatabase(like.executor, like.settings);
  }
  return resolveDb(db);
}

function normaliseBasePath(value: string): string {
  if (typeof value !== "string" || !/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(value)) {
    throw new TypeError(`createDashboard: basePath must be a URL path starting with "/", got ${JSON.stringify(value)}`);
  }
  return value.replace(/\/+$/, "");
}

/** Express strips the mount path from `req.url` and keeps the full one in `originalUrl`. */
function requestPath(req: IncomingMessage): string {
  return (req as { originalUrl?: string }).originalUrl ?? req.url ?? "/";
}

function readNotice(req: IncomingMessage): { kind: Notice; job: number } | undefined {
  const value = readCookie(req, NOTICE_COOKIE);
  const match = value === undefined ? null : /^([a-z-]+)\.(\d{1,15})$/.exec(value);
  if (!match || !NOTICES.includes(match[1] as Notice)) return undefined;
  return { kind: match[1] as Notice, job: Number(match[2]) };
}

/** The urlencoded form: already parsed by a framework (`req.body`), or read here, bounded. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams | null> {
  const parsed = (req as { body?: unknown }).body;
  if (parsed && typeof parsed === "object" && !Buffer.isBuffer(parsed)) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(parsed)) if (typeof value === "string") params.set(key, value);
    return params;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_FORM_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.statusCode = status;
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
  res.setHeader("Content-Type", type);
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(body);
}

function sendError(res: ServerResponse, status: number, title: string, detail: string): void {
  send(
    res,
    status,
    "text/html; charset=utf-8",
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${status} ${escapeHtml(title)}</h1><p>${escapeHtml(detail)}</p></body></html>`,
  );
}

function methodNotAllowed(res: ServerResponse, allow: string): void {
  res.setHeader("Allow", allow);
  sendError(res, 405, "Method Not Allowed", `Use ${allow}.`);
}
