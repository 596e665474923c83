import multipart from "@fastify/multipart";
import Fastify, { type FastifyInstance, type FastifyServerOptions } from "fastify";
import type { AppConfig } from "./config.js";
import { openDatabase, type AppDatabase } from "./db.js";
import { installProblemHandlers } from "./problems.js";
import { adminRoutes } from "./routes/admin.js";
import { campaignRoutes } from "./routes/campaigns.js";
import { exportRoutes } from "./routes/exports.js";
import { importRoutes } from "./routes/imports.js";
import { jobRoutes } from "./routes/jobs.js";
import { passwordResetRoutes } from "./routes/password-resets.js";

export interface BuildOptions {
  /** An open database (tests share theirs); default: opened from the config and closed with the app. */
  db?: AppDatabase;
  logger?: FastifyServerOptions["logger"];
}

/**
 * The web process: routes that enqueue and answer at once, and the dashboard. It runs no
 * job itself (that is src/worker.ts). Listen with `app.listen({ port: 0 })` in tests.
 */
export async function buildApp(config: AppConfig, options: BuildOptions = {}): Promise<{ app: FastifyInstance; db: AppDatabase }> {
  const db = options.db ?? openDatabase(config);
  const app = Fastify({ logger: options.logger ?? true });
  if (!options.db) app.addHook("onClose", () => db.close());

  installProblemHandlers(app);
  // Limits for every multipart request; the import route asks for the same ones again.
  await app.register(multipart, { limits: { fileSize: config.maxUploadBytes, files: 1, fields: 10, parts: 11 } });

  app.get("/health", async () => ({ ok: true }));
  campaignRoutes(app, db, config);
  passwordResetRoutes(app, db, config);
  importRoutes(app, db, config);
  exportRoutes(app, db, config);
  jobRoutes(app, db);
  adminRoutes(app, db, config.adminToken);
  return { app, db };
}
