// The worker process: `pnpm worker` (tsx src/worker.ts). One process serving the three
// queues; run as many as you need, on as many machines as you like.
import { runWorker, type Logger } from "@forge/jobs";
import { loadConfig, redactUrl } from "./config.js";
import { migrateApp, openDatabase } from "./db.js";
import { createHandlers, QUEUES } from "./handlers.js";
import { declareMailLimits } from "./mail-limits.js";

const log = (message: string) => console.log(`[worker ${process.pid}] ${message}`);

const config = loadConfig();
const db = openDatabase(config);
let handlers: ReturnType<typeof createHandlers>;
try {
  handlers = createHandlers(config, db);
} catch (error) {
  console.error(`[worker] ${(error as Error).message}`);
  await db.close();
  process.exit(1);
}
await migrateApp(db);
// The provider's limits live in the database, where every worker's claim reads them; each
// worker declares them from its configuration before it claims anything.
log(await declareMailLimits(db.jobs, config));

// First SIGTERM (or SIGINT): stop claiming, let running jobs finish within the grace period,
// hand the rest back without burning an attempt. A second one: exit at once (the leases of
// what was running expire and another worker takes the jobs over).
const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    if (stop.signal.aborted) {
      log(`second ${signal}: exiting now`);
      process.exit(1);
    }
    log(`${signal}: finishing running jobs (send it again to exit at once)`);
    stop.abort();
  });
}

const line = (level: string) => (obj: object, msg?: string) =>
  log(`${level}${msg ?? ""}${Object.keys(obj).length ? ` ${JSON.stringify(obj, (_k, v: unknown) => (v instanceof Error ? v.message : v))}` : ""}`);
const logger: Logger = { debug: () => undefined, info: line(""), warn: line("warning: "), error: line("error: ") };

log(`serving ${Object.values(QUEUES).join(", ")} from ${redactUrl(config.databaseUrl)}${config.databaseSchema ? ` (schema ${config.databaseSchema})` : ""}`);
await runWorker(handlers, {
  queue: Object.values(QUEUES),
  concurrency: 10,
  signal: stop.signal,
  db: db.jobs,
  logger,
  events: {
    "job:succeeded": ({ job, durationMs }) => log(`job ${job.id} ${job.task} (${job.queue}) done in ${durationMs} ms`),
    "job:failed": ({ job, error, willRetry, retryInSeconds }) =>
      log(
        `job ${job.id} ${job.task} (${job.queue}) failed${willRetry ? `, retry in ${retryInSeconds} s` : ""}: ${error instanceof Error ? error.message : String(error)}`,
      ),
  },
});
await db.close();
log("stopped");
