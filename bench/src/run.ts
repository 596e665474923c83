/**
 * The benchmark harness of @forge/jobs: ours against graphile-worker, pg-boss and raw SQL on
 * the same PostgreSQL, each in its own schema, round-robin per measure. `pnpm bench --help`.
 * Measures, never asserts.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { FULL, MEASURES, PG_URL, QUICK, SCHEMA, parseArgs, type MeasureName } from "./lib/env.js";
import { adminClient, installStatementCounter, quietStats } from "./lib/metrics.js";
import { printTargets } from "./lib/targets.js";
import { attachPrevious, loadResults, printTable, saveResults, type Results, type Table } from "./lib/report.js";
import { setQuietWait, type Ctx } from "./measures/common.js";
import { writeMarkdown } from "./markdown.js";
import { ForgeSystem } from "./systems/forge.js";
import { GraphileSystem } from "./systems/graphile.js";
import { pgForgeAdmin } from "./systems/pg-admin.js";
import { PgBossSystem } from "./systems/pgboss.js";
import { RawPgSystem } from "./systems/pg-raw.js";
import { Unavailable } from "./systems/types.js";

const BENCH_DIR = fileURLToPath(new URL("..", import.meta.url));
const LATEST = `${BENCH_DIR}results/latest.json`;

function pkgVersion(name: string): string {
  try {
    const p = fileURLToPath(import.meta.resolve(`${name}/package.json`));
    return (JSON.parse(readFileSync(p, "utf8")) as { version: string }).version;
  } catch {
    try {
      // Packages whose exports hide package.json: walk up from the entry.
      let dir = fileURLToPath(import.meta.resolve(name));
      while (dir !== "/") {
        dir = dir.slice(0, dir.lastIndexOf("/"));
        if (existsSync(`${dir}/package.json`)) {
          const pkg = JSON.parse(readFileSync(`${dir}/package.json`, "utf8")) as { name: string; version: string };
          if (pkg.name === name) return pkg.version;
        }
      }
    } catch {
      // No readable package.json up the tree: the version is unknown.
    }
    return "?";
  }
}

function git(args: string[]): string {
  try {
    return execFileSync("git", args, { cwd: BENCH_DIR, encoding: "utf8" }).trim();
  } catch {
    return "?";
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.render) {
    const saved = loadResults(LATEST);
    if (!saved) throw new Error("no results/latest.json to render");
    writeMarkdown(`${BENCH_DIR}BENCHMARKS.md`, saved);
    console.log("bench/BENCHMARKS.md rendered from bench/results/latest.json");
    return;
  }
  const sizes = { ...(args.quick ? QUICK : FULL) };
  if (args.rounds) sizes.rounds = args.rounds;
  const wanted = (m: MeasureName) => (args.only ? args.only.includes(m) : true);
  installStatementCounter();
  setQuietWait(sizes.quietWaitMs);
  quietStats.budgetMs = sizes.quietBudgetMs;
  const admin = await adminClient();
  const serverVersion = (await admin.query<{ server_version: string }>("SHOW server_version")).rows[0]!.server_version;
  const settings = (
    await admin.query<{ name: string; setting: string }>(
      "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_level', 'shared_buffers', 'max_connections', 'full_page_writes')",
    )
  ).rows;
  const meta = {
    date: new Date().toISOString(),
    mode: args.quick ? "quick" : "full",
    only: args.only,
    rounds: sizes.rounds,
    sizes,
    machine: {
      nproc: Number(execFileSync("nproc", { encoding: "utf8" }).trim()),
      cpu: cpus()[0]?.model ?? "?",
      memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
      node: process.version,
      postgres: serverVersion,
      postgresSettings: Object.fromEntries(settings.map((s) => [s.name, s.setting])),
    },
    versions: {
      "@forge/jobs": `${pkgVersion("@forge/jobs")} (work tree at ${git(["rev-parse", "--short", "HEAD"])}${git(["status", "--porcelain", "--", "../packages/jobs"]) ? ", uncommitted changes" : ""}; ${process.env.BENCH_FORGE_ENTRY === "src" ? "src via tsx" : "dist, built by pnpm bench"})`,
      "graphile-worker": pkgVersion("graphile-worker"),
      "pg-boss": pkgVersion("pg-boss"),
      pg: pkgVersion("pg"),
      "better-sqlite3": pkgVersion("better-sqlite3"),
      mysql2: pkgVersion("mysql2"),
    },
  };
  // Every invocation starts from fresh schemas: table statistics left by an earlier run (an
  // ANALYZE taken while a table held a backlog) change plans — for ours, 25× (see BENCHMARKS.md).
  // The 1M-row fixture of the bloat measure is kept: it is vacuumed and analysed on purpose.
  for (const schema of [
    SCHEMA.forge,
    SCHEMA.forgeScale,
    SCHEMA.graphile,
    SCHEMA.pgboss,
    SCHEMA.pgbossNotify,
    SCHEMA.raw,
    SCHEMA.forgeFlow,
    SCHEMA.forgeFlowUnused,
    SCHEMA.forgeFlowKeyed,
    SCHEMA.graphileFlow,
    SCHEMA.pgbossFlow,
    "bench_forge_explain",
    "bench_forge_x",
    "bench_forge_probe",
  ]) {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  }
  const previous = loadResults(LATEST);
  const results: Results = { meta, tables: [], skipped: [] };
  console.log(`@forge/jobs benchmarks — ${meta.mode} mode, ${sizes.rounds} round(s)${args.only ? `, only ${args.only.join(",")}` : ""}`);
  console.log(
    `machine: ${meta.machine.nproc} cores (${meta.machine.cpu}), ${meta.machine.memoryGiB} GiB, node ${process.version}, PostgreSQL ${serverVersion} (fsync ${meta.machine.postgresSettings.fsync}, synchronous_commit ${meta.machine.postgresSettings.synchronous_commit})`,
  );
  console.log(
    `versions: ${Object.entries(meta.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
  );
  if (previous) console.log(`comparing with ${LATEST.replace(BENCH_DIR, "bench/")} (${String(previous.meta.mode)} run of ${String(previous.meta.date)})`);

  const ctx: Ctx = {
    sizes,
    admin,
    results,
    previous,
    publish: (table: Table) => {
      table.measuredAt = meta.date;
      attachPrevious(table, previous);
      results.tables.push(table);
      printTable(table);
    },
    skip: (measure, reason) => {
      results.skipped.push({ measure, reason });
      console.log(`\n-- skip ${measure}: ${reason}`);
    },
  };

  const started = Date.now();
  const pgMeasures: MeasureName[] = ["enqueue-one", "enqueue-bulk", "processing", "latency"];
  if (pgMeasures.some(wanted)) {
    const { enqueueOne, enqueueBulk, processing, latency } = await import("./measures/pg.js");
    const systems = {
      forge: new ForgeSystem("forge", "@forge/jobs", "postgres", PG_URL, SCHEMA.forge, pgForgeAdmin(admin)),
      graphile: new GraphileSystem(admin),
      pgboss: new PgBossSystem(admin, SCHEMA.pgboss, false),
      pgbossNotify: new PgBossSystem(admin, SCHEMA.pgbossNotify, true),
      raw: new RawPgSystem(admin),
    };
    let ready = true;
    for (const sys of Object.values(systems)) {
      try {
        await sys.prepare();
      } catch (error) {
        ready = false;
        ctx.skip(`postgres measures`, error instanceof Unavailable ? error.message : `${sys.label}: ${(error as Error).stack}`);
      }
    }
    if (ready) {
      const steps: [MeasureName, () => Promise<void>][] = [
        ["enqueue-one", () => enqueueOne(ctx, systems)],
        ["enqueue-bulk", () => enqueueBulk(ctx, systems)],
        ["processing", () => processing(ctx, systems)],
        ["latency", () => latency(ctx, systems)],
      ];
      for (const [name, step] of steps) {
        if (!wanted(name)) continue;
        console.log(`\n[${name}]`);
        const t0 = Date.now();
        try {
          await step();
          console.log(`   (${name}: ${((Date.now() - t0) / 1000).toFixed(0)} s)`);
        } catch (error) {
          ctx.skip(name, `failed: ${(error as Error).stack}`);
        }
      }
    }
    for (const sys of Object.values(systems)) await sys.close().catch(() => undefined);
  }
  for (const name of ["backends", "scale", "bloat", "profile", "flow", "batch", "ten-million", "history", "import", "plain-path"] as const) {
    if (!wanted(name)) continue;
    console.log(`\n[${name}]`);
    const t0 = Date.now();
    try {
      const mod = await import(`./measures/${name}.js`);
      await mod.run(ctx);
      console.log(`   (${name}: ${((Date.now() - t0) / 1000).toFixed(0)} s)`);
    } catch (error) {
      ctx.skip(name, `failed: ${(error as Error).stack}`);
    }
  }
  await admin.end();
  if (quietStats.runs) {
    const note = `${quietStats.runs} measured runs; waited ${(quietStats.waitedMs / 1000).toFixed(0)} s in all for an idle machine; ${quietStats.noisy} started with the machine still busy (>25% CPU used by others)`;
    console.log(`
machine noise: ${note}`);
    results.meta.noise = note;
  }
  const minutes = ((Date.now() - started) / 60000).toFixed(1);
  console.log(`\ndone in ${minutes} min`);
  results.meta.durationMinutes = Number(minutes);

  if (!args.save) printTargets(results);
  if (args.save) {
    // A partial run (--only) refreshes its own tables and keeps the rest of the last results.
    const merged: Results =
      args.only && previous
        ? {
            meta: { ...previous.meta, partialUpdate: { date: meta.date, only: args.only, mode: meta.mode } },
            tables: [...previous.tables.filter((t) => !results.tables.some((n) => n.id === t.id)), ...results.tables],
            skipped: [...previous.skipped.filter((s) => !args.only!.some((m) => s.measure.startsWith(m))), ...results.skipped],
            profile: results.profile ?? previous.profile,
          }
        : results;
    merged.tables.sort((a, b) => order(a.id) - order(b.id));
    printTargets(merged);
    saveResults(LATEST, merged);
    console.log(`results written to bench/results/latest.json`);
    if (!args.quick) {
      writeMarkdown(`${BENCH_DIR}BENCHMARKS.md`, merged);
      console.log(`tables written to bench/BENCHMARKS.md`);
    }
  }
}

const ORDER = [
  "enqueue-one",
  "enqueue-bulk",
  "processing-c1",
  "processing-c10",
  "processing-c50",
  "latency",
  "sqlite",
  "mariadb",
  "scale",
  "bloat",
  "flow",
  "ten-million",
  "import",
];
function order(id: string): number {
  const i = ORDER.findIndex((p) => id.startsWith(p));
  return i < 0 ? ORDER.length : i;
}

void MEASURES;
main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
