// The web process: `pnpm start` (tsx src/server.ts). Jobs run in src/worker.ts.
import { buildApp } from "./app.js";
import { loadConfig, redactUrl } from "./config.js";
import { migrateApp } from "./migrate.js";
import { createLogger } from "./logging.js";

const config = loadConfig();
const { app, db } = await buildApp(config, { loggerInstance: createLogger("web") });
await migrateApp(db);
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
