import type { IncomingMessage, ServerResponse } from "node:http";
import { readCookie } from "./csrf.js";
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
  const match = value === undefined ? null : /^([a-z-]+)\.(\d{1,15})(?:\.(\d{1,15}))?$/.exec(value);
  if (value !== undefined) res.appendHeader("Set-Cookie", `${NOTICE_COOKIE}=; Path=${basePath}; Max-Age=0; HttpOnly; SameSite=Strict`);
  if (!match || !NOTICES.includes(match[1] as Notice)) return undefined;
  return { kind: match[1] as Notice, job: Number(match[2]), ...(match[3] === undefined ? {} : { of: Number(match[3]) }) };
}

/** 303 to `location` with a notice for the next page. */
export function redirectWithNotice(res: ServerResponse, basePath: string, location: string, notice: Notice, n: number, of?: number): void {
  res.statusCode = 303;
  res.setHeader("Location", location);
  res.appendHeader("Set-Cookie", `${NOTICE_COOKIE}=${notice}.${n}${of === undefined ? "" : `.${of}`}; Path=${basePath}; Max-Age=60; HttpOnly; SameSite=Strict`);
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
  res.end();
}

/** The urlencoded form: already parsed by a framework (`req.body`), or read here, bounded. */
export async function readForm(req: IncomingMessage): Promise<URLSearchParams | null> {
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
