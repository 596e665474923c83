/**
 * Where the time per job goes on one backend: N no-op jobs enqueued in bulk, then one worker of
 * @forge/jobs (the built package, as `pnpm bench` runs it) with every statement it sends timed
 * at the package's Executor seam (the queue built on a timed copy of connect()'s executor, through
 * the exported JobsDatabase), summed per statement shape and divided by the jobs; on SQLite also
 * inside better-sqlite3 itself. Then the raw loop of the same backend (bench/src/systems/*-raw.ts)
 * on the same machine, for the ratio. Both timed as the processing measure times them
 * (measures/common.ts processingRun: from the worker's start until no job is unfinished).
 *
 * `tsx src/probe-statements.ts --backend=sqlite|mysql|postgres [jobs=20000] [concurrency=10] [--prefetch=N]`
 */
import { mkdirSync, rmSync } from "node:fs";
import { performance } from "node:perf_hooks";
import type { JobsDatabase } from "../../packages/jobs/src/index.ts";
import { MARIADB_URL, PG_URL, SQLITE_DIR } from "./lib/env.js";
import { adminClient } from "./lib/metrics.js";
import { StatementClock, timedExecutor, timeSqliteDriver } from "./lib/statement-timing.js";
import { processingRun, setQuietWait } from "./measures/common.js";
import { ForgeSystem, type ForgeAdmin } from "./systems/forge.js";
import { mariadbForgeAdmin, RawMariaDbSystem } from "./systems/mariadb-raw.js";
import { pgForgeAdmin } from "./systems/pg-admin.js";
import { RawPgSystem } from "./systems/pg-raw.js";
import { RawSqliteSystem, sqliteForgeAdmin } from "./systems/sqlite-raw.js";
import type { QueueSystem, StartOptions, WorkerHandle } from "./systems/types.js";

const SCHEMA = "probe_statements";

/** ForgeSystem whose worker runs on a timed executor, timed from its start to its stop. */
class TimedForgeSystem extends ForgeSystem {
  readonly clock = new StatementClock();
  readonly driverClock = new StatementClock();
  wallMs = 0;
  private timing = false;

  protected override open(): JobsDatabase {
    const db = super.open();
    if (!this.timing) return db;
    if (this.backend === "sqlite") timeSqliteDriver(db.executor.raw as object, this.driverClock);
    return new this.forge.JobsDatabase(timedExecutor(db.executor, this.clock), db.settings);
  }

  override async startWorker(options: StartOptions): Promise<WorkerHandle> {
    this.timing = true;
    this.clock.reset();
    this.driverClock.reset();
    const t0 = performance.now();
    this.clock.enabled = this.driverClock.enabled = true;
    const handle = await super.startWorker(options);
    this.timing = false;
    return {
      stop: async () => {
        this.clock.enabled = this.driverClock.enabled = false;
        this.wallMs = performance.now() - t0;
        await handle.stop();
      },
    };
  }
}

function parse(argv: string[]) {
  const flags = new Map<string, string>();
  const rest: string[] = [];
  for (const a of argv) {
    const m = /^--([a-z]+)(?:=(.*))?$/.exec(a);
    if (m) flags.set(m[1]!, m[2] ?? "");
    else if (a !== "--") rest.push(a);
  }
  const backend = flags.get("backend");
  if (backend !== "sqlite" && backend !== "mysql" && backend !== "postgres") throw new Error("--backend=sqlite|mysql|postgres is required");
  const prefetch = flags.get("prefetch");
  return {
    backend: backend as "sqlite" | "mysql" | "postgres",
    jobs: Number(rest[0] ?? 20000),
    concurrency: Number(rest[1] ?? 10),
    workerOptions: prefetch === undefined ? {} : { prefetch: prefetch === "auto" ? "auto" : Number(prefetch) },
  };
}

async function systemsFor(backend: "sqlite" | "mysql" | "postgres", workerOptions: Record<string, unknown>) {
  if (backend === "sqlite") {
    mkdirSync(SQLITE_DIR, { recursive: true });
    const file = `${SQLITE_DIR}/probe-statements.db`;
    for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
    const admin = sqliteForgeAdmin(file);
    return {
      forge: new TimedForgeSystem("forge", "@forge/jobs", "sqlite", `sqlite:${file}`, undefined, admin, workerOptions),
      raw: new RawSqliteSystem() as QueueSystem,
      pgAdmin: null,
      close: async () => admin.close(),
    };
  }
  if (backend === "mysql") {
    const admin = mariadbForgeAdmin();
    await admin.pool.query(`DROP DATABASE IF EXISTS \`${SCHEMA}\``);
    await admin.pool.query(`CREATE DATABASE \`${SCHEMA}\``);
    return {
      forge: new TimedForgeSystem("forge", "@forge/jobs", "mariadb", MARIADB_URL, SCHEMA, admin, workerOptions),
      raw: new RawMariaDbSystem() as QueueSystem,
      pgAdmin: null,
      close: async () => {
        await admin.pool.query(`DROP DATABASE IF EXISTS \`${SCHEMA}\``);
        await admin.pool.end();
      },
    };
  }
  const pgAdmin = await adminClient();
  await pgAdmin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  const admin: ForgeAdmin = pgForgeAdmin(pgAdmin);
  return {
    forge: new TimedForgeSystem("forge", "@forge/jobs", "postgres", PG_URL, SCHEMA, admin, workerOptions),
    raw: new RawPgSystem(pgAdmin) as QueueSystem,
    pgAdmin,
    close: async () => {
      await pgAdmin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
      await pgAdmin.end();
    },
  };
}

const us = (ms: number, n: number) => (ms * 1000) / n;
const fmt = (x: number) => (x >= 100 ? Math.round(x).toLocaleString("en-US") : x.toFixed(1));

const { backend, jobs, concurrency, workerOptions } = parse(process.argv.slice(2));
setQuietWait(Number(process.env.BENCH_QUIET_WAIT_MS ?? 5000));
const s = await systemsFor(backend, workerOptions);
await s.forge.prepare();
await s.raw.prepare();
const timeoutS = Number(process.env.BENCH_RUN_TIMEOUT_S ?? 120);
const ours = await processingRun(s.forge, "default", concurrency, jobs, timeoutS, s.pgAdmin);
const raw = await processingRun(s.raw, "batch100", concurrency, jobs, timeoutS, s.pgAdmin);
await s.forge.close();
await s.raw.close();
await s.close();

const { clock, driverClock, wallMs } = s.forge;
const n = ours.processed || 1;
const rows = [...clock.shapes.entries()].map(([shape, v]) => ({
  shape,
  count: v.count,
  ms: v.ms,
  busyMs: v.busyMs,
  driverMs: driverClock.shapes.get(shape)?.ms,
}));
for (const [shape, v] of driverClock.shapes) if (!clock.shapes.has(shape)) rows.push({ shape, count: v.count, ms: NaN, busyMs: NaN, driverMs: v.ms });
rows.sort((a, b) => (Number.isNaN(b.ms) ? b.driverMs! : b.ms) - (Number.isNaN(a.ms) ? a.driverMs! : a.ms));
const statementsMs = rows.filter((r) => !r.shape.startsWith("(") && !Number.isNaN(r.ms)).reduce((a, r) => a + r.ms, 0);
const sqlite = backend === "sqlite";

const out: string[] = [];
out.push(
  `@forge/jobs on ${backend}, ${jobs} no-op jobs enqueued in bulk, then runWorker({ concurrency: ${concurrency}${Object.keys(workerOptions).length ? `, ${JSON.stringify(workerOptions).slice(1, -1)}` : ""} }); ${ours.processed}/${jobs} done${ours.timedOut ? " (timed out)" : ""}`,
  "",
  `| statement shape (first 60 chars) | calls/job | µs/job at the executor (summed) | in flight, µs/job | share of wall${sqlite ? " | µs/job inside better-sqlite3" : ""} |`,
  `|---|---:|---:|---:|---:${sqlite ? "|---:" : ""}|`,
);
for (const r of rows) {
  const cell = (ms: number | undefined) => (ms === undefined || Number.isNaN(ms) ? "–" : fmt(us(ms, n)));
  const share = Number.isNaN(r.busyMs) ? "–" : `${((100 * r.busyMs) / wallMs).toFixed(0)}%`;
  out.push(
    `| \`${r.shape.replace(/\|/g, "\\|")}\` | ${(r.count / n).toFixed(3)} | ${cell(r.ms)} | ${cell(r.busyMs)} | ${share}${sqlite ? ` | ${cell(r.driverMs)}` : ""} |`,
  );
}
const driverTotal = [...driverClock.shapes.values()].reduce((a, v) => a + v.ms, 0);
out.push(
  "",
  `- wall time per job (worker start → no unfinished job): ${fmt(us(wallMs, n))} µs (${Math.round(n / (wallMs / 1000))} jobs/s; processingRun says ${Math.round(ours.rateFromStart)} jobs/s)`,
  `- sum over statements (they overlap when several are in flight): ${fmt(us(statementsMs, n))} µs/job; time with at least one statement in flight: ${fmt(us(clock.busyMs, n))} µs/job`,
  `- time with no statement in flight (the worker's own JS, the handler, timers, idle): ${fmt(us(wallMs - clock.busyMs, n))} µs/job (${((100 * (wallMs - clock.busyMs)) / wallMs).toFixed(0)}% of the wall time)`,
);
if (sqlite)
  out.push(
    `- inside better-sqlite3 (synchronous, no overlap): ${fmt(us(driverTotal, n))} µs/job (${((100 * driverTotal) / wallMs).toFixed(0)}% of the wall time)`,
  );
out.push(
  `- raw loop (${s.raw.describe("batch100")}): ${Math.round(raw.rateFromStart)} jobs/s = ${fmt(1e6 / raw.rateFromStart)} µs/job; @forge/jobs ÷ raw = ${(ours.rateFromStart / raw.rateFromStart).toFixed(2)}×`,
);
console.log(out.join("\n"));
process.exit(0);
