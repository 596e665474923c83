import type { IncomingMessage, ServerResponse } from "node:http";
import { CSRF_FIELD, readCookie, type Csrf } from "./csrf.js";
import { escapeHtml } from "./escape.js";
import { NOTICES, type Notice } from "./notices.js";
import type { PageModel } from "./render.js";

// The dashboard's plain-Node HTTP plumbing: headers, bounded form bodies, the flash notice.

/** What an action did, shown once by the next page load (a flash cookie: a reload does not repeat it). */
const NOTICE_COOKIE = "forge_jobs_notice";
const MAX_FORM_BYTES = 4096;

export const SECURITY_HEADERS: Record<string, string> = {
  // No script at all on the page: even a value that escaped escaping could not run.
  "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  // A page URL carries filter values (tenant, task names), which other sites have no business seeing.
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-store",
};

/** The notice an action left for this page (and its cookie cleared), if any. */
export function takeNotice(req: IncomingMessage, res: ServerResponse, basePath: string): PageModel["notice"] {
  const value = readCookie(req, NOTICE_COOKIE);
  const match = value === undefined ? null : /^([a-z-]+)\.(\d{1,15})(?:\.(\d{1,15}))?(?:\.((?:\d{1,15}_){0,99}\d{1,15}))?$/.exec(value);
  if (value !== undefined) res.appendHeader("Set-Cookie", `${NOTICE_COOKIE}=; Path=${basePath}; Max-Age=0; HttpOnly; SameSite=Strict`);
  if (!match || !NOTICES.includes(match[1] as Notice)) return undefined;
  return {
    kind: match[1] as Notice,
    job: Number(match[2]),
    ...(match[3] === undefined ? {} : { of: Number(match[3]) }),
    ...(match[4] === undefined ? {} : { refused: match[4].split("_").map(Number) }),
  };
}

/** 303 to `location` with a notice for the next page; `refused`: the selected jobs an action left alone (at most 100). */
export function redirectWithNotice(
  res: ServerResponse,
  basePath: string,
  location: string,
  notice: Notice,
  n: number,
  of?: number,
  refused: readonly number[] = [],
): void {
  res.statusCode = 303;
  res.setHeader("Location", location);
  const counts = `${n}${of === undefined ? "" : `.${of}`}${of !== undefined && refused.length > 0 ? `.${refused.slice(0, 100).join("_")}` : ""}`;
  res.appendHeader("Set-Cookie", `${NOTICE_COOKIE}=${notice}.${counts}; Path=${basePath}; Max-Age=60; HttpOnly; SameSite=Strict`);
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
  res.end();
}

/** The urlencoded form: already parsed by a framework (`req.body`), or read here, bounded. */
export async function readForm(req: IncomingMessage): Promise<URLSearchParams | null> {
  const parsed = (req as { body?: unknown }).body;
  if (parsed && typeof parsed === "object" && !Buffer.isBuffer(parsed)) {
    const params = new URLSearchParams();
    // A field sent more than once (the selected rows' `id`) arrives as an array.
    for (const [key, value] of Object.entries(parsed)) for (const one of [value].flat()) if (typeof one === "string") params.append(key, one);
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

export function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.statusCode = status;
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
  res.setHeader("Content-Type", type);
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(body);
}

export function sendError(res: ServerResponse, status: number, title: string, detail: string): void {
  send(
    res,
    status,
    "text/html; charset=utf-8",
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${status} ${escapeHtml(title)}</h1><p>${escapeHtml(detail)}</p></body></html>`,
  );
}

export function methodNotAllowed(res: ServerResponse, allow: string): void {
  res.setHeader("Allow", allow);
  sendError(res, 405, "Method Not Allowed", `Use ${allow}.`);
}

export function safeDecode(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/** Express strips the mount path from `req.url` and keeps the full one in `originalUrl`. */
export function requestPath(req: IncomingMessage): string {
  return (req as { originalUrl?: string }).originalUrl ?? req.url ?? "/";
}

/** A form post: 415 / 413 / 403 answered here, else the form. */
export async function checkedForm(req: IncomingMessage, res: ServerResponse, csrf: Csrf): Promise<URLSearchParams | null> {
  const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") {
    sendError(res, 415, "Unsupported Media Type", "Actions are HTML form posts (application/x-www-form-urlencoded).");
    return null;
  }
  const form = await readForm(req);
  if (form === null) {
    sendError(res, 413, "Payload Too Large", "This form is larger than any the dashboard sends.");
    return null;
  }
  if (!csrf.verify(req, form.get(CSRF_FIELD) ?? undefined)) {
    sendError(res, 403, "Forbidden", "The form's security token is missing or does not match: reload the dashboard and try again.");
    return null;
  }
  return form;
}
