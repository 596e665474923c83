// The worker process: `pnpm worker` (tsx src/worker.ts). One process serving the three
// queues; run as many as you need, on as many machines as you like.
import { runWorker } from "@forge/jobs";
import type { MailHandler } from "@forge/mail";
import { loadConfig, redactUrl } from "./config.js";
import { openDatabase } from "./db.js";
import { migrateApp } from "./migrate.js";
import { createHandlers, mailHandler, QUEUES } from "./handlers.js";
import { createLogger } from "./logging.js";
import { startMetrics, type Metrics } from "./metrics.js";
import { declareMailLimits } from "./mail-limits.js";
import { uploadCleanup } from "./uploads.js";

// The same logger as the web process (pino, one JSON line per event); the queue logs through it too.
const log = createLogger("worker");

const config = loadConfig();
const db = openDatabase(config);
let mail: MailHandler;
let handlers: ReturnType<typeof createHandlers>;
try {
  mail = mailHandler(config, db);
  handlers = createHandlers(config, db, mail);
} catch (error) {
  log.error({ err: (error as Error).message }, (error as Error).message);
  await db.close();
  process.exit(1);
}
// First SIGTERM (or SIGINT): stop claiming, let running jobs finish within the grace period,
// hand the rest back without burning an attempt. A second one: exit at once (the leases of
// what was running expire and another worker takes the jobs over). Listened for before the
// first write to the database: until then SIGTERM's default action kills the process outright,
// and whoever watches the database may send it as soon as it sees the worker there.
const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    if (stop.signal.aborted) {
      log.warn({ signal }, `second ${signal}: exiting now`);
      process.exit(1);
    }
    log.info({ signal }, `${signal}: finishing running jobs (send it again to exit at once)`);
    stop.abort();
  });
}

await migrateApp(db);
// The provider's limits live in the database, where every worker's claim reads them; each
// worker declares them from its configuration before it claims anything.
log.info({ mailProvider: config.mailProvider }, await declareMailLimits(db.jobs, config));

log.info(
  { queues: Object.values(QUEUES), database: redactUrl(config.databaseUrl), schema: config.databaseSchema ?? null },
  `serving ${Object.values(QUEUES).join(", ")}`,
);
// Before the first job, so its counters start at the first run; the exporter's server does not
// keep the process alive.
let metrics: Metrics | undefined;
if (config.metricsPort !== undefined) {
  metrics = await startMetrics({ port: config.metricsPort, host: config.host });
  log.info({ metricsPort: config.metricsPort }, `metrics at http://${config.host}:${config.metricsPort}/metrics`);
}
const uploads = uploadCleanup(db, config, log);
await runWorker(handlers, {
  queue: Object.values(QUEUES),
  concurrency: 10,
  ...(config.progressInterval === undefined ? {} : { progressInterval: config.progressInterval }),
  signal: stop.signal,
  db: db.jobs,
  // A failed attempt is logged by the queue itself, once (warn, with jobId, attempt, willRetry,
  // err): no job:failed listener here, or each failure would be two lines.
  logger: log,
  events: {
    "job:succeeded": (event) => {
      const { job, durationMs } = event;
      log.info({ jobId: job.id, task: job.task, queue: job.queue, attempt: job.attempt, durationMs }, `job ${job.id} done`);
      uploads["job:succeeded"]!(event);
    },
    // An import that ended, done or failed for good, no longer needs its upload (src/uploads.ts).
    "job:failed": uploads["job:failed"]!,
  },
});
// A pool's idle connections would keep the process alive.
mail.close();
await metrics?.shutdown();
await db.close();
log.info({}, "stopped");
