// The web process: `pnpm start` (tsx src/server.ts). Jobs run in src/worker.ts.
import { observeQueueDepth } from "@forge/jobs";
import { buildApp } from "./app.js";
import { loadConfig, redactUrl } from "./config.js";
import { migrateApp } from "./migrate.js";
import { createLogger } from "./logging.js";
import { startMetrics } from "./metrics.js";

const config = loadConfig();
const metrics = await startMetrics();
const { app, db } = await buildApp(config, { loggerInstance: createLogger("web"), metrics: metrics.exporter });
await migrateApp(db);
// The queues' depth (ready, running, oldest ready age) is read from the database at each
// scrape: one process is enough, this one; workers export their own counters.
const stopObserving = observeQueueDepth({ db: db.jobs });
app.addHook("onClose", async () => {
  stopObserving();
  await metrics.shutdown();
});
await app.listen({ port: config.port, host: config.host });
app.log.info({ database: redactUrl(config.databaseUrl), schema: config.databaseSchema ?? null }, "database");

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    app.log.info({ signal }, `${signal}: closing`);
    // Stops accepting, lets in-flight requests finish, then closes the database (onClose).
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
