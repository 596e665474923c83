import { mkdir, writeFile, access } from "node:fs/promises";
import { join, resolve } from "node:path";
import { connect, connectForReading, dialectOf } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { dialectMigrationSql, migrate } from "../migrations/migrate.js";
import { connectionError, jobsPastLease, schedulesWithoutHandler, schemaState, tasksWithoutHandler } from "../maintenance/health.js";

/** The migration that made the schedules table: an older schema has none to check. */
const SCHEDULES_VERSION = 5;
/** The migration after which ended jobs belong in history, not the live table (issue 33). */
const LIVE_ONLY_VERSION = 14;
import { prune, type PruneOptions } from "../maintenance/admin.js";
import { isMaintenanceTask } from "../maintenance/maintenance.js";
import { reclaim } from "../maintenance/reclaim.js";
import { legacyEndedCount } from "../maintenance/upgrade.js";
import { idsBehindHistory } from "../run/reused-ids.js";
import { statusCounts } from "../reads/status.js";
import { createWorker } from "../worker/worker.js";
import { timerMs } from "../base/timers.js";
import { flowOverview } from "../flow/flow-overview.js";
import { renderFlow } from "./flow-tables.js";
import { renderStatus } from "./table.js";
import { loadHandlers } from "./handlers-module.js";
import { ProblemsFound, UsageError, parseDuration, parseNumber } from "./usage.js";

export interface Io {
  out(text: string): void;
  err(text: string): void;
  /** Whether `out` is a terminal (screen-clearing codes are for terminals only). */
  isTTY?: boolean;
}

export interface Parsed {
  positionals: string[];
  values: Record<string, string | boolean | string[] | undefined>;
}

/** The database the command names; `reading` for commands that must never create one. */
export function openDatabase(p: Parsed, { reading = false, listening = false } = {}): JobsDatabase {
  const url = (p.values["database-url"] as string | undefined) ?? process.env.DATABASE_URL;
  const schema = p.values.schema as string | undefined;
  // A read replica serves the commands that only read (status, list, show); the others never see it.
  const readUrl = reading ? ((p.values["read-url"] as string | undefined) ?? (process.env.DATABASE_READ_URL || undefined)) : undefined;
  // The worker's wake-ups straight to the server, when its URL goes through a transaction pooler.
  const listenUrl = listening ? ((p.values["listen-url"] as string | undefined) ?? (process.env.DATABASE_LISTEN_URL || undefined)) : undefined;
  return (reading ? connectForReading : connect)(url, { ...(schema ? { schema } : {}), ...(readUrl ? { readUrl } : {}), ...(listenUrl ? { listenUrl } : {}) });
}

export async function init(p: Parsed, io: Io): Promise<void> {
  const dir = resolve((p.values.dir as string | undefined) ?? "migrations");
  const dialect = (p.values.dialect as string | undefined) ?? dialectOf(p.values["database-url"] as string | undefined);
  if (dialect !== "postgres" && dialect !== "sqlite" && dialect !== "mysql") {
    throw new UsageError(
      p.values.dialect === undefined
        ? "the database URL names no backend: pass --dialect postgres, sqlite or mysql, or a postgres://, mysql:// or sqlite: URL"
        : `--dialect must be postgres, sqlite or mysql, got ${JSON.stringify(dialect)}`,
    );
  }
  await mkdir(dir, { recursive: true });
  for (const migration of dialectMigrationSql(dialect, { schema: p.values.schema as string | undefined })) {
    const file = join(dir, `${String(migration.version).padStart(3, "0")}_forge_jobs_${migration.name}.${dialect}.sql`);
    const exists = await access(file).then(
      () => true,
      () => false,
    );
    if (exists) {
      io.out(`kept    ${file} (already there)\n`);
      continue;
    }
    await writeFile(
      file,
      `-- @forge/jobs migration ${migration.version} (${migration.name}) for ${dialect}\n-- Review, then apply with your migration tool or with: forge-jobs migrate\n\n${migration.sql}`,
    );
    io.out(`wrote   ${file}\n`);
  }
}

export async function runMigrate(p: Parsed, io: Io): Promise<void> {
  const db = openDatabase(p);
  try {
    const result = await migrate({ db });
    io.out(
      result.applied.length
        ? `applied migrations ${result.applied.join(", ")}; schema at version ${result.version}\n`
        : `schema already at version ${result.version}; nothing to do\n`,
    );
  } finally {
    await db.close();
  }
}

/** The shortest redraw interval of `status --watch`: each redraw runs the status reads. */
const MIN_WATCH_SECONDS = 0.5;

export async function status(p: Parsed, io: Io): Promise<void> {
  const queue = (p.values.queue as string[] | undefined)?.[0];
  const watch = p.values.watch;
  const seconds = watch === undefined ? null : watch === true ? 2 : (parseNumber(watch as string, "--watch") ?? 2);
  if (seconds !== null && seconds < MIN_WATCH_SECONDS) {
    throw new UsageError(`--watch must be at least ${MIN_WATCH_SECONDS} seconds (each redraw reads the database), got ${String(watch)}`);
  }
  const db = openDatabase(p, { reading: true });
  const read = async () => {
    const statuses = await statusCounts({ db, ...(queue ? { queue } : {}) });
    // Queues exist only through their jobs: a name with none is most likely a typo.
    if (queue && statuses.every((s) => s.total === 0 && !s.paused)) {
      const known = (await statusCounts({ db })).map((s) => s.queue);
      throw new ProblemsFound(`no job has ever been in queue ${JSON.stringify(queue)}; queues with jobs: ${known.length > 0 ? known.join(", ") : "none"}`);
    }
    return statuses;
  };
  try {
    if (seconds === null) {
      const statuses = await read();
      io.out(p.values.json ? JSON.stringify(statuses, null, 2) + "\n" : renderStatus(statuses) + renderFlow(await flowOverview(db.forReading())));
      return;
    }
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
    // Clear the screen only on a terminal: piped into a file or a pager, each redraw is appended.
    const clear = io.isTTY ? "\x1b[2J\x1b[H" : "\n";
    try {
      while (!stop.signal.aborted) {
        const statuses = await read();
        const body = p.values.json
          ? JSON.stringify({ at: new Date().toISOString(), queues: statuses }) + "\n"
          : `${clear}${new Date().toISOString()}  (every ${seconds}s, Ctrl-C to stop)\n\n${renderStatus(statuses)}${renderFlow(await flowOverview(db.forReading()))}`;
        io.out(body);
        await sleepUnless(stop.signal, seconds * 1000);
      }
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  } finally {
    await db.close();
  }
}

/** Waits `ms`, or less if `signal` fires; leaves no listener on the signal either way. */
function sleepUnless(signal: AbortSignal, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, timerMs(ms));
    signal.addEventListener("abort", done, { once: true });
  });
}

export async function runReclaim(p: Parsed, io: Io): Promise<void> {
  const db = openDatabase(p);
  try {
    const lease = parseNumber(p.values.lease as string | undefined, "--lease");
    const queue = (p.values.queue as string[] | undefined)?.[0];
    const jobs = await reclaim({ db, ...(lease === undefined ? {} : { lease }), ...(queue ? { queue } : {}) });
    const back = jobs.filter((j) => j.status === "pending").length;
    io.out(`reclaimed ${jobs.length} job(s): ${back} back to pending, ${jobs.length - back} failed (no attempt left)\n`);
  } finally {
    await db.close();
  }
}

export async function runWorkerCommand(p: Parsed, io: Io): Promise<void> {
  const [modulePath] = p.positionals;
  if (!modulePath) throw new UsageError("worker needs the path of a handlers module: forge-jobs worker ./handlers.js");
  const handlers = await loadHandlers(modulePath);
  const db = openDatabase(p, { listening: true });
  const stop = new AbortController();
  let signals = 0;
  const onSignal = (name: string) => {
    signals++;
    if (signals === 1) {
      io.err(`${name}: stopping gracefully (in-flight jobs may finish; a second signal stops at once)\n`);
      stop.abort();
    } else {
      io.err(`${name} again: stopping now; unfinished jobs come back when their lease expires\n`);
      process.exit(130);
    }
  };
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  const queues = (p.values.queue as string[] | undefined) ?? ["default"];
  const num = (name: string, integer = false) => parseNumber(p.values[name] as string | undefined, `--${name}`, integer);
  const options = {
    db,
    queue: queues,
    signal: stop.signal,
    ...(num("concurrency", true) !== undefined ? { concurrency: num("concurrency", true) } : {}),
    ...(num("lease") !== undefined ? { lease: num("lease") } : {}),
    ...(num("grace") !== undefined ? { gracePeriod: num("grace") } : {}),
    ...(num("poll") !== undefined ? { pollInterval: num("poll") } : {}),
    ...(p.values["no-schedules"] ? { schedules: false } : {}),
  };
  const worker = createWorker(handlers, options);
  worker.on("worker:started", (e) =>
    io.err(`worker ${e.workerId} serving ${e.queues.join(", ")} (concurrency ${e.concurrency}, tasks: ${Object.keys(handlers).join(", ")})\n`),
  );
  worker.on("job:failed", (e) =>
    io.err(
      `job ${e.job.id} (${e.job.task}) failed on attempt ${e.job.attempt}/${e.job.maxAttempts}${e.willRetry ? `, retry in ${e.retryInSeconds}s` : ""}: ${e.error instanceof Error ? e.error.message : String(e.error)}\n`,
    ),
  );
  worker.on("worker:error", (e) => io.err(`worker error while ${e.during}: ${e.error instanceof Error ? e.error.message : String(e.error)}\n`));
  worker.on("worker:stopped", () => io.err("worker stopped\n"));
  try {
    await worker.run();
  } finally {
    // A handler still running past the grace period may hold a connection: closing waits for
    // it, so give up after a while (the process exits; its jobs were handed back).
    await Promise.race([db.close(), new Promise((r) => setTimeout(r, 2000).unref())]);
  }
}

export async function doctor(p: Parsed, io: Io): Promise<void> {
  const db = openDatabase(p, { reading: true });
  const problems: string[] = [];
  const ok = (text: string) => io.out(`ok      ${text}\n`);
  const bad = (text: string) => (problems.push(text), io.out(`PROBLEM ${text}\n`));
  try {
    const unreachable = await connectionError(db);
    if (unreachable !== null) {
      bad(`cannot connect: ${unreachable}`);
      throw new ProblemsFound(`${problems.length} problem(s) found`);
    }
    ok(`connected (${db.dialect})`);
    const { version, latest } = await schemaState(db);
    if (version === 0) bad("the jobs schema is not applied: run forge-jobs migrate (or forge-jobs init to review the SQL)");
    else if (version < latest) bad(`the jobs schema is at version ${version}, this package needs ${latest}: run forge-jobs migrate`);
    else ok(`schema at version ${version} (current)`);
    if (version >= LIVE_ONLY_VERSION) {
      const legacy = await legacyEndedCount(db);
      if (legacy > 0) bad(`${legacy} ended jobs still in the live table: run forge-jobs upgrade or let a worker do it`);
      else ok("no ended job left in the live table");
      const behind = await idsBehindHistory(db);
      if (behind)
        bad(
          `the live table's next job id (${behind.next}) is not above history's highest (${behind.highest}): its ids restarted (a TRUNCATE of the live table alone?) and new jobs take ended jobs' ids; ${mendIds(db, behind.highest)}`,
        );
      else ok("new job ids continue after history's");
    }
    if (version > 0) {
      const stuck = await jobsPastLease(db);
      if (stuck > 0) bad(`${stuck} job(s) running past their lease (worker lost?): workers reclaim them on their own, or run forge-jobs reclaim`);
      else ok("no job stuck past its lease");
      const handlersPath = p.values.handlers as string | undefined;
      if (handlersPath) {
        const handlers = await loadHandlers(handlersPath);
        const { queued, missing } = await tasksWithoutHandler(db, (task) => isMaintenanceTask(task) || Object.prototype.hasOwnProperty.call(handlers, task));
        if (missing.length) bad(`queued tasks without a handler in ${handlersPath}: ${missing.map((t) => `${t.task} (${t.count})`).join(", ")}`);
        else ok(`every queued task has a handler (${queued} task name(s) queued)`);
        if (version >= SCHEDULES_VERSION) {
          const scheduled = await schedulesWithoutHandler(db, (task) => isMaintenanceTask(task) || Object.prototype.hasOwnProperty.call(handlers, task));
          if (scheduled.missing.length) {
            bad(`schedules whose task has no handler in ${handlersPath}: ${scheduled.missing.map((s) => `${s.name} (task ${s.task})`).join(", ")}`);
          } else ok(`every schedule's task has a handler (${scheduled.schedules} schedule(s))`);
        }
      }
    }
  } finally {
    await db.close();
  }
  if (problems.length) throw new ProblemsFound(`${problems.length} problem(s) found`);
}

export async function runPrune(p: Parsed, io: Io): Promise<void> {
  const text = p.values["older-than"] as string | undefined;
  if (!text) throw new UsageError("prune needs --older-than <duration>, e.g. --older-than 7d");
  const olderThan = parseDuration(text, "--older-than");
  const statusText = p.values.status as string[] | undefined;
  const statuses = statusText?.flatMap((s) => s.split(",")).map((s) => s.trim()) as PruneOptions["statuses"];
  const batchText = p.values["batch-size"] as string | undefined;
  const batchSize = batchText === undefined ? undefined : Number(batchText);
  if (batchSize !== undefined && !(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= 100_000)) {
    throw new UsageError(`--batch-size must be a whole number from 1 to 100000, got ${JSON.stringify(batchText)}`);
  }
  const into = p.values.into as string | undefined;
  if (into !== undefined && into !== "history")
    throw new UsageError(`--into takes "history" (PostgreSQL: move the jobs to the history table), got ${JSON.stringify(into)}`);
  const db = openDatabase(p);
  try {
    const n = await prune({ db, olderThan, ...(statuses ? { statuses } : {}), ...(batchSize === undefined ? {} : { batchSize }), ...(into ? { into } : {}) });
    io.out(`${into ? "moved to the history table" : "deleted"} ${n} finished job(s) older than ${text}${statuses ? ` (${statuses.join(", ")})` : ""}\n`);
  } finally {
    await db.close();
  }
}

/** What to run to move the live table's ids past history's highest (run/reused-ids.ts). */
function mendIds(db: JobsDatabase, highest: number): string {
  if (db.dialect === "postgres") return `run SELECT setval(pg_get_serial_sequence('${db.table.replaceAll("'", "''")}', 'id'), ${highest})`;
  if (db.dialect === "mysql") return `a worker mends it when such a job ends, or run ALTER TABLE ${db.table} AUTO_INCREMENT = ${highest + 1}`;
  return `a worker mends it when such a job ends, or run UPDATE sqlite_sequence SET seq = ${highest} WHERE name = 'jobs'`;
}
