import multipart from "@fastify/multipart";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from "fastify";
import type { AppConfig } from "./config.js";
import { openDatabase, type AppDatabase } from "./db.js";
import { registerOpenApi } from "./openapi.js";
import { clientErrorHandler, frameworkErrors, installProblemHandlers } from "./problems.js";
import { adminRoutes } from "./routes/admin.js";
import { bounceRoutes, httpsSnsClient, type SnsClient } from "./routes/bounces.js";
import { campaignRoutes } from "./routes/campaigns.js";
import { exportRoutes } from "./routes/exports.js";
import { flowRoutes } from "./routes/flows.js";
import { importRoutes } from "./routes/imports.js";
import { jobRoutes } from "./routes/jobs.js";
import { importPageRoutes } from "./routes/import-page.js";
import { mailPreviewRoutes } from "./routes/mail-preview.js";
import { notificationRoutes } from "./routes/notifications.js";
import { passwordResetRoutes } from "./routes/password-resets.js";
import { unsubscribeRoutes } from "./routes/unsubscribe.js";
import { userRoutes } from "./routes/users.js";

export interface BuildOptions {
  /** An open database (tests share theirs); default: opened from the config and closed with the app. */
  db?: AppDatabase;
  /** Fastify's `logger` option (tests pass false); ignored when `loggerInstance` is given. */
  logger?: FastifyServerOptions["logger"];
  /** A pino logger of the app's own (src/logging.ts): the one the worker uses too. */
  loggerInstance?: FastifyBaseLogger;
  /** How the SES webhook reaches Amazon SNS (certificates, subscription confirmation); default: HTTPS. */
  sns?: SnsClient;
  /** Serves `GET /metrics` (Prometheus text) from this exporter (src/metrics.ts); none without it. */
  metrics?: PrometheusExporter;
}

/**
 * The web process: routes that enqueue and answer at once, and the dashboard. It runs no
 * job itself (that is src/worker.ts). Listen with `app.listen({ port: 0 })` in tests.
 */
export async function buildApp(config: AppConfig, options: BuildOptions = {}): Promise<{ app: FastifyInstance; db: AppDatabase }> {
  const db = options.db ?? openDatabase(config);
  const fastifyOptions = {
    // Schemas say what is wrong with every field at once, and a wrong type stays wrong ({"subject": 5}
    // is not coerced to "5"). `verbose` gives each error its schema, whose description the message uses.
    ajv: { customOptions: { allErrors: true, coerceTypes: false, removeAdditional: false, verbose: true } },
    frameworkErrors,
    clientErrorHandler,
  } as const;
  const app = (
    options.loggerInstance
      ? Fastify({ ...fastifyOptions, loggerInstance: options.loggerInstance })
      : Fastify({ ...fastifyOptions, logger: options.logger ?? true })
  ).withTypeProvider<TypeBoxTypeProvider>();
  if (!options.db) app.addHook("onClose", () => db.close());

  installProblemHandlers(app);
  // The API takes JSON (and the upload, multipart): a text/plain body is a 415, not a string
  // for the schema to refuse.
  app.removeContentTypeParser("text/plain");
  await registerOpenApi(app);
  // Limits for every multipart request; the import route asks for the same ones again.
  await app.register(multipart, { limits: { fileSize: config.maxUploadBytes, files: 1, fields: 10, parts: 11 } });

  app.get("/health", { schema: { response: { 200: Type.Object({ ok: Type.Boolean() }) } } }, async () => ({ ok: true }));
  campaignRoutes(app, db, config);
  passwordResetRoutes(app, db, config);
  importRoutes(app, db, config);
  exportRoutes(app, db, config);
  jobRoutes(app, db);
  importPageRoutes(app, db, config.progressInterval);
  adminRoutes(app, db, config.adminToken);
  mailPreviewRoutes(app, db, config);
  unsubscribeRoutes(app, db, config);
  bounceRoutes(app, db, config, options.sns ?? httpsSnsClient());
  notificationRoutes(app, db, config);
  flowRoutes(app, db, config);
  userRoutes(app, db);
  const exporter = options.metrics;
  if (exporter) {
    // The exporter writes the response itself, from the raw Node objects.
    app.get("/metrics", { schema: { hide: true } }, (request, reply) => {
      reply.hijack();
      exporter.getMetricsRequestHandler(request.raw, reply.raw);
    });
  }
  return { app, db };
}
