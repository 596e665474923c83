// Pressure cells (issue 33, point 6), after the public harness hardbyte/postgresql-job-queue-
// benchmarking (docs/method.md): at a fixed offered rate, each system in its own fresh database,
// one after the other in the same run: a clean phase, then (a) an idle transaction holding an XID,
// (b) 4 REPEATABLE READ readers scanning the queue table, (c) 1.5× the offered rate, each for a
// phase and followed by a recovery at the offered rate. Method and figures: BENCHMARKS.md,
// "Pressure cells".
//
//   pnpm --filter @forge/bench pressure -- [--rate=1000] [--work-ms=1] [--phase=300] [--recovery=120]
//        [--warmup=30] [--window=5] [--concurrency=16] [--systems=forge,graphile,pgboss]
//        [--variants=graphile:tuned,pgboss:notify] [--json=results/pressure.json] [--md=results/pressure.md] [--keep]
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { forkReady } from "./measures/scale.js";
import { PG_URL } from "./lib/env.js";
import { sleep } from "./lib/stats.js";
import { ask, PRESSURES, runPhase, type PhaseResult, type SystemRun } from "./pressure/phases.js";
import { checkTargets, renderPressure, type PressureRun, type SystemResult } from "./pressure/report.js";
import { DEFAULT_VARIANTS, PRESSURE_SYSTEMS, type PressureSystemId } from "./pressure/systems.js";

const CHILD = fileURLToPath(new URL("./pressure/child.ts", import.meta.url));
const LABELS: Record<PressureSystemId, string> = { forge: "@forge/jobs", graphile: "graphile-worker", pgboss: "pg-boss" };

const { values: args } = parseArgs({
  // pnpm passes the "--" that separates its own options through.
  args: process.argv.slice(2).filter((a) => a !== "--"),
  options: {
    rate: { type: "string", default: "1000" },
    "work-ms": { type: "string", default: "1" },
    phase: { type: "string", default: "300" },
    recovery: { type: "string", default: "120" },
    warmup: { type: "string", default: "30" },
    window: { type: "string", default: "5" },
    concurrency: { type: "string", default: "16" },
    systems: { type: "string", default: PRESSURE_SYSTEMS.join(",") },
    variants: { type: "string", default: "" },
    json: { type: "string", default: "results/pressure.json" },
    md: { type: "string", default: "results/pressure.md" },
    keep: { type: "boolean", default: false },
  },
});
const rate = Number(args.rate);
const workMs = Number(args["work-ms"]);
const phaseS = Number(args.phase);
const recoveryS = Number(args.recovery);
const warmupS = Number(args.warmup);
const windowS = Number(args.window);
const concurrency = Number(args.concurrency);
const systems = args.systems.split(",").filter(Boolean) as PressureSystemId[];
for (const id of systems) if (!PRESSURE_SYSTEMS.includes(id)) throw new Error(`unknown system ${id}; choose from ${PRESSURE_SYSTEMS.join(", ")}`);
const variants = {
  ...DEFAULT_VARIANTS,
  ...Object.fromEntries(
    args.variants
      .split(",")
      .filter(Boolean)
      .map((kv) => kv.split(":") as [string, string]),
  ),
};

/** The URL of database `name` on the server of PG_URL. */
function databaseUrl(name: string): string {
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Autovacuum on for the run: the server's switch (ALTER SYSTEM, reloaded), since a table's
 * autovacuum_enabled does nothing while the launcher is off; put back as it was at the end.
 * Every table keeps its default autovacuum_enabled = true.
 */
async function autovacuumOn(admin: pg.Client): Promise<{ note: string; restore: () => Promise<void> }> {
  const before = (await admin.query<{ autovacuum: string }>("SHOW autovacuum")).rows[0]!.autovacuum;
  if (before === "on") return { note: "autovacuum on (server default)", restore: async () => undefined };
  await admin.query("ALTER SYSTEM SET autovacuum = on");
  await admin.query("SELECT pg_reload_conf()");
  await sleep(500);
  let restored = false;
  return {
    note: "autovacuum turned on for the run (server was off; put back after)",
    restore: async () => {
      if (restored) return;
      restored = true;
      await admin.query("ALTER SYSTEM RESET autovacuum");
      await admin.query("SELECT pg_reload_conf()");
    },
  };
}

async function runSystem(admin: pg.Client, id: PressureSystemId): Promise<SystemResult> {
  const database = `bench_pressure_${id}`;
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${database}`);
  const url = databaseUrl(database);
  const client = new pg.Client({ connectionString: url, application_name: "pressure stats" });
  await client.connect();
  const variant = variants[id];
  const [child] = await forkReady(CHILD, [id, url, variant, String(concurrency), String(rate), String(workMs)], 1, `${id} pressure process`);
  try {
    const ready = await ask(child!, { type: "describe" });
    if (ready.type !== "ready") throw new Error(`expected ready, got ${ready.type}`);
    const run: SystemRun = { child: child!, client, url, schema: ready.schema, hot: ready.hot, rate, windowS };
    console.log(`${LABELS[id]} (${variant}) in database ${database}: queue table ${ready.hot.join(", ")}`);
    if (warmupS > 0) await runPhase(run, "warm-up", warmupS, { rate });
    const phases: PhaseResult[] = [await runPhase(run, "clean", phaseS, { rate })];
    const cleanBytes = phases[0]!.liveBytes;
    for (const { key } of PRESSURES) {
      phases.push(await runPhase(run, key, phaseS, { rate: key === "high-load" ? rate * 1.5 : rate, pressure: key === "high-load" ? undefined : key }));
      phases.push(await runPhase(run, `recovery after ${key}`, recoveryS, { rate, cleanBytes }));
    }
    return { id, label: LABELS[id], variant, describe: ready.describe, phases };
  } finally {
    await ask(child!, { type: "stop" }).catch(() => undefined);
    await client.end();
    if (!args.keep) await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}

async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: PG_URL, application_name: "pressure admin" });
  await admin.connect();
  const av = await autovacuumOn(admin);
  const onSignal = () => void av.restore().finally(() => process.exit(130));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const total = systems.length * (warmupS + 4 * phaseS + 3 * recoveryS);
  console.log(`pressure: ${rate} jobs/s, ${workMs} ms handlers, ${systems.join(", ")}; about ${Math.ceil(total / 60)} min in all`);
  const results: SystemResult[] = [];
  try {
    for (const id of systems) results.push(await runSystem(admin, id));
  } finally {
    await av.restore();
    await admin.end();
  }
  const run: PressureRun = {
    date: new Date().toISOString(),
    rate,
    workMs,
    concurrency,
    warmupS,
    phaseS,
    recoveryS,
    windowS,
    autovacuum: av.note,
    systems: results,
    targets: checkTargets(results, rate),
  };
  const md = renderPressure(run);
  console.log(`\n${md}`);
  for (const [path, text] of [
    [args.json, JSON.stringify(run, null, 2) + "\n"],
    [args.md, md],
  ] as const) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }
}

await main();
