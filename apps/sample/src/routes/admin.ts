import { createDashboard } from "@forge/jobs/dashboard";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AppDatabase } from "../db.js";
import { PROBLEM_TYPES, sendProblem } from "../problems.js";
import { AdminAuth, SESSION_COOKIE, SESSION_SECONDS } from "./admin-session.js";

export const DASHBOARD_PATH = "/admin/jobs";
export const LOGIN_PATH = "/admin/login";
const LOGOUT_PATH = "/admin/logout";

const PAGE_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "cache-control": "no-store",
  // Not no-referrer: under it, Chromium sends `Origin: null` with the form's post, and the
  // same-origin check below could not tell this page from a sandboxed frame elsewhere.
  "referrer-policy": "same-origin",
};

function loginPage(failed: boolean): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign in — jobs dashboard</title></head>
<body style="font-family:system-ui,sans-serif;max-width:24rem;margin:4rem auto">
<h1>Jobs dashboard</h1>
${failed ? '<p role="alert" style="color:#b00">That token is not the admin token.</p>' : ""}
<form method="post" action="${LOGIN_PATH}">
<label>Admin token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">Sign in</button>
</form></body></html>`;
}

/** A form post from this very site: a login form on another site must not sign anyone in. */
function sameOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  return origin === undefined || origin === `${request.protocol}://${request.headers.host}`;
}

function sessionCookie(request: FastifyRequest, value: string, maxAge: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/admin; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${request.protocol === "https" ? "; Secure" : ""}`;
}

/**
 * The queue dashboard of @forge/jobs, mounted at /admin/jobs behind ADMIN_TOKEN: a browser signs
 * in once at /admin/login (the token never travels in a URL: it would land in access logs and
 * in every link and form), a script sends `Authorization: Bearer <token>`. The dashboard is a
 * plain Node handler: in Fastify, a route hijacks the reply and hands it the raw request and
 * response. Without a token configured, nothing is mounted (404).
 */
export function adminRoutes(app: FastifyInstance, db: AppDatabase, adminToken: string | undefined): void {
  if (!adminToken) {
    app.log.warn(`ADMIN_TOKEN is not set: the queue dashboard at ${DASHBOARD_PATH} is disabled (404)`);
    return;
  }
  const auth = new AdminAuth(adminToken);
  const dashboard = createDashboard({ db: db.jobs, basePath: DASHBOARD_PATH, title: "Forge sample — jobs", logger: app.log });

  app.register(async (login) => {
    // The login form's body, here only: the dashboard reads its own forms.
    login.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string", bodyLimit: 4096 }, (_request, body, done) =>
      done(null, Object.fromEntries(new URLSearchParams(body as string))),
    );
    login.get(LOGIN_PATH, async (_request, reply) => reply.headers(PAGE_HEADERS).send(loginPage(false)));
    login.post(LOGIN_PATH, async (request, reply) => {
      const token = (request.body as Record<string, unknown> | undefined)?.token;
      if (!sameOrigin(request) || typeof token !== "string" || !auth.matches(token)) return reply.code(401).headers(PAGE_HEADERS).send(loginPage(true));
      return reply.header("set-cookie", sessionCookie(request, auth.issue(), SESSION_SECONDS)).redirect(DASHBOARD_PATH, 303);
    });
    login.post(LOGOUT_PATH, async (request, reply) => reply.header("set-cookie", sessionCookie(request, "", 0)).redirect(LOGIN_PATH, 303));
  });

  app.register(async (admin) => {
    // The dashboard reads its own form bodies: leave the request stream untouched.
    admin.removeAllContentTypeParsers();
    admin.addContentTypeParser("*", (_request, _payload, done) => done(null));
    // Checked before any body is read.
    admin.addHook("onRequest", async (request, reply) => {
      if (auth.allows(request)) return;
      // A browser asking for the page is sent to sign in; anything else gets the problem.
      if (request.method === "GET" && (request.headers.accept ?? "").includes("text/html")) return reply.redirect(LOGIN_PATH, 303);
      return unauthorized(reply);
    });
    const mount = (request: FastifyRequest, reply: { hijack(): void; raw: import("node:http").ServerResponse }) => {
      reply.hijack();
      dashboard(request.raw, reply.raw);
    };
    admin.route({ method: ["GET", "POST"], url: DASHBOARD_PATH, handler: mount });
    admin.route({ method: ["GET", "POST"], url: `${DASHBOARD_PATH}/*`, handler: mount });
  });
}

function unauthorized(reply: FastifyReply) {
  reply.header("WWW-Authenticate", 'Bearer realm="forge-jobs-dashboard"');
  return sendProblem(reply, {
    type: PROBLEM_TYPES.unauthorized,
    title: "Unauthorized",
    status: 401,
    detail: `The dashboard needs the admin token: sign in at ${LOGIN_PATH}, or send Authorization: Bearer <ADMIN_TOKEN>.`,
  });
}
