import { mkdirSync, rmSync } from "node:fs";
import { MARIADB_URL, PG_URL, SQLITE_DIR } from "../lib/env.js";
import { BASELINE_COMMIT, baselineBuild } from "../lib/baseline.js";
import type { Row } from "../lib/report.js";
import { median, rotate } from "../lib/stats.js";
import { ForgeSystem, type ForgeAdmin } from "../systems/forge.js";
import { mariadbForgeAdmin } from "../systems/mariadb-raw.js";
import { pgForgeAdmin } from "../systems/pg-admin.js";
import { sqliteForgeAdmin } from "../systems/sqlite-raw.js";
import { addSample, enqueueBulkRun, processingRun, type Ctx } from "./common.js";

/** Schemas (PostgreSQL) and databases (MariaDB) of the two builds; dropped before each run. */
export const PLAIN_SCHEMAS = { baseline: "bench_plain_baseline", current: "bench_plain_current" } as const;
type Build = keyof typeof PLAIN_SCHEMAS;
const BACKENDS = [
  ["postgres", "PostgreSQL"],
  ["sqlite", "SQLite"],
  ["mariadb", "MariaDB"],
] as const;
const MEASURES = ["enqueue-one", "enqueue-bulk", "processing-c10"] as const;
type Measure = (typeof MEASURES)[number];

/**
 * The plain path against the baseline build (lib/baseline.ts), in the same run: enqueue one by
 * one, bulk enqueue and processing at concurrency 10, with every option unused, on each
 * backend. Both builds are imported into this process and run in turn, the first alternating
 * from round to round, each on a database of its own emptied before every run. "÷ baseline"
 * is taken round by round (this tree's rate over the baseline's in the same round) and its
 * median is the figure: the machine's drift between rounds falls out of it.
 */
export async function run(ctx: Ctx): Promise<void> {
  const entry = baselineBuild();
  const rounds = ctx.sizes.plainRounds;
  const only = process.env.BENCH_PLAIN_BACKENDS?.split(",");
  for (const [backend, title] of BACKENDS.filter(([b]) => !only || only.includes(b))) {
    let systems: Record<Build, ForgeSystem>;
    const cleanups: (() => Promise<void>)[] = [];
    try {
      systems = {
        baseline: await prepared(ctx, backend, "baseline", entry, cleanups),
        current: await prepared(ctx, backend, "current", undefined, cleanups),
      };
    } catch (error) {
      ctx.skip(`plain-path ${backend}`, `not reachable: ${(error as Error).message.split("\n")[0]}`);
      for (const c of cleanups) await c().catch(() => undefined);
      continue;
    }
    const size =
      backend === "mariadb" ? { one: ctx.sizes.backendEnqueueOne, jobs: ctx.sizes.backendJobs } : { one: ctx.sizes.enqueueOne, jobs: ctx.sizes.processing };
    const rows = Object.fromEntries(
      MEASURES.map((m) => [
        m,
        {
          baseline: { system: "baseline", label: `baseline (${BASELINE_COMMIT})`, config: "the last commit before issue 36", samples: {} } as Row,
          current: { system: "forge", label: "@forge/jobs (this tree)", config: "every option unused", samples: {} } as Row,
        },
      ]),
    ) as Record<Measure, Record<Build, Row>>;
    for (let r = 0; r < rounds; r++) {
      process.stdout.write(`  ${backend} round ${r + 1}:`);
      const order = rotate(["baseline", "current"] as Build[], r);
      const rates: Record<Measure, Partial<Record<Build, number>>> = {
        "enqueue-one": await interleavedOne(systems, order, size.one),
        "enqueue-bulk": {},
        "processing-c10": {},
      };
      // Three bulk calls each, alternating builds, their median: one call is short (as in pg.ts).
      const bulk: Record<Build, number[]> = { baseline: [], current: [] };
      for (let k = 0; k < 3; k++)
        for (const build of k % 2 ? [...order].reverse() : order) bulk[build].push((await enqueueBulkRun(systems[build], size.jobs, null)).rate);
      for (const build of order) rates["enqueue-bulk"][build] = median(bulk[build]);
      for (const build of order) {
        rates["processing-c10"][build] = (await processingRun(systems[build], "default", 10, size.jobs, ctx.sizes.runTimeoutS, null)).rate;
        process.stdout.write(` ${build} ${Math.round(rates["processing-c10"][build]!)}`);
      }
      for (const m of MEASURES) {
        const { baseline, current } = rates[m] as Record<Build, number>;
        addSample(rows[m].baseline, "jobs/s", baseline);
        addSample(rows[m].current, "jobs/s", current);
        addSample(rows[m].current, "÷ baseline", current / baseline);
      }
      process.stdout.write("\n");
    }
    for (const m of MEASURES) {
      ctx.publish({
        id: `plain-${backend}-${m}`,
        title: `${title}, plain path: ${m === "enqueue-one" ? `enqueue one by one (N=${size.one})` : m === "enqueue-bulk" ? `bulk enqueue (N=${size.jobs})` : `processing ${size.jobs} no-op jobs at concurrency 10`}, this tree against ${BASELINE_COMMIT}`,
        unit: "jobs/s",
        better: "higher",
        columns: ["jobs/s", "÷ baseline"],
        ref: "baseline",
        rows: [rows[m].baseline, rows[m].current],
        notes: [`${rounds} rounds; "÷ baseline" is the median of the per-round ratios.`],
      });
    }
    for (const s of Object.values(systems)) await s.close().catch(() => undefined);
    for (const c of cleanups) await c().catch(() => undefined);
  }
}

/**
 * Enqueue one by one, the two builds in turn by blocks of a tenth of `count` (the first
 * alternating), each build's rate over its blocks summed: one enqueue is one commit, whose flush
 * time drifts with the disk from second to second, and blocks side by side see the same drift.
 */
async function interleavedOne(systems: Record<Build, ForgeSystem>, order: Build[], count: number): Promise<Partial<Record<Build, number>>> {
  const block = Math.max(1, Math.round(count / 10));
  const spent: Record<Build, number> = { baseline: 0, current: 0 };
  for (const build of order) {
    await systems[build].reset();
    for (let i = 0; i < 20; i++) await systems[build].enqueueOne({ i: -1 });
  }
  for (let b = 0; b * block < count; b++) {
    for (const build of b % 2 ? [...order].reverse() : order) {
      const t0 = performance.now();
      for (let i = 0; i < block; i++) await systems[build].enqueueOne({ i: b * block + i });
      spent[build] += performance.now() - t0;
    }
  }
  const n = Math.ceil(count / block) * block;
  return { baseline: (n / spent.baseline) * 1000, current: (n / spent.current) * 1000 };
}

async function prepared(
  ctx: Ctx,
  backend: (typeof BACKENDS)[number][0],
  build: Build,
  entry: string | undefined,
  cleanups: (() => Promise<void>)[],
): Promise<ForgeSystem> {
  const name = PLAIN_SCHEMAS[build];
  let system: ForgeSystem;
  if (backend === "postgres") {
    await ctx.admin.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
    system = new ForgeSystem("forge", build, "postgres", PG_URL, name, pgForgeAdmin(ctx.admin), {}, entry);
  } else if (backend === "sqlite") {
    mkdirSync(SQLITE_DIR, { recursive: true });
    const file = `${SQLITE_DIR}/${name}.db`;
    for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
    const admin = sqliteForgeAdmin(file);
    cleanups.push(async () => admin.close());
    system = new ForgeSystem("forge", build, "sqlite", `sqlite:${file}`, undefined, admin, {}, entry);
  } else {
    const admin = mariadbForgeAdmin();
    cleanups.push(() => admin.pool.end());
    await admin.pool.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await admin.pool.query(`CREATE DATABASE \`${name}\``);
    system = new ForgeSystem("forge", build, "mariadb", MARIADB_URL, name, admin as ForgeAdmin, {}, entry);
  }
  await system.prepare();
  return system;
}
