import { createHash, timingSafeEqual } from "node:crypto";
import { createDashboard } from "@forge/jobs/dashboard";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AppDatabase } from "../db.js";
import { PROBLEM_TYPES, sendProblem } from "../problems.js";

export const DASHBOARD_PATH = "/admin/jobs";

function digest(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

/** `Authorization: Bearer <token>` or `?token=<token>` (what a browser can carry through links and forms). */
export function presentedToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header?.startsWith("Bearer ")) return header.slice("Bearer ".length).trim();
  const query = request.query as Record<string, unknown> | undefined;
  return typeof query?.token === "string" ? query.token : undefined;
}

/**
 * The queue dashboard of @forge/jobs, mounted at /admin/jobs behind ADMIN_TOKEN. The
 * dashboard is a plain Node handler: in Fastify, a route hijacks the reply and hands it the
 * raw request and response. Without a token configured, nothing is mounted (404).
 */
export function adminRoutes(app: FastifyInstance, db: AppDatabase, adminToken: string | undefined): void {
  if (!adminToken) {
    app.log.warn(`ADMIN_TOKEN is not set: the queue dashboard at ${DASHBOARD_PATH} is disabled (404)`);
    return;
  }
  const expected = digest(adminToken);
  const dashboard = createDashboard({ db: db.jobs, basePath: DASHBOARD_PATH, title: "Forge sample — jobs" });

  app.register(async (admin) => {
    // The dashboard reads its own form bodies: leave the request stream untouched.
    admin.removeAllContentTypeParsers();
    admin.addContentTypeParser("*", (_request, _payload, done) => done(null));
    // Checked before any body is read.
    admin.addHook("onRequest", async (request, reply) => {
      const token = presentedToken(request);
      if (token === undefined || !timingSafeEqual(digest(token), expected)) {
        reply.header("WWW-Authenticate", 'Bearer realm="forge-jobs-dashboard"');
        return sendProblem(reply, {
          type: PROBLEM_TYPES.unauthorized,
          title: "Unauthorized",
          status: 401,
          detail: "The dashboard needs the admin token: Authorization: Bearer <ADMIN_TOKEN>, or ?token=<ADMIN_TOKEN>.",
        });
      }
    });
    const mount = (request: FastifyRequest, reply: { hijack(): void; raw: import("node:http").ServerResponse }) => {
      reply.hijack();
      dashboard(request.raw, reply.raw);
    };
    admin.route({ method: ["GET", "POST"], url: DASHBOARD_PATH, handler: mount });
    admin.route({ method: ["GET", "POST"], url: `${DASHBOARD_PATH}/*`, handler: mount });
  });
}
