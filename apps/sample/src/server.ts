// The web process: `pnpm start` (tsx src/server.ts). Jobs run in src/worker.ts.
import { buildApp } from "./app.js";
import { loadConfig, redactUrl } from "./config.js";
import { migrateApp } from "./db.js";

const config = loadConfig();
const { app, db } = await buildApp(config);
await migrateApp(db);
await app.listen({ port: config.port, host: config.host });
app.log.info(`database ${redactUrl(config.databaseUrl)}${config.databaseSchema ? ` (schema ${config.databaseSchema})` : ""}`);

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    app.log.info(`${signal}: closing`);
    // Stops accepting, lets in-flight requests finish, then closes the database (onClose).
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
