import { rmSync, mkdirSync } from "node:fs";
import { MARIADB_URL, SQLITE_DIR } from "../lib/env.js";
import type { Row } from "../lib/report.js";
import { rotate } from "../lib/stats.js";
import { ForgeSystem } from "../systems/forge.js";
import { mariadbForgeAdmin, RawMariaDbSystem } from "../systems/mariadb-raw.js";
import { RawSqliteSystem, sqliteForgeAdmin, synchronousLevel } from "../systems/sqlite-raw.js";
import { Unavailable, type QueueSystem } from "../systems/types.js";
import { addSample, enqueueBulkRun, enqueueOneRun, latencyRun, processingRun, type Ctx } from "./common.js";

const FORGE_MARIADB_DB = "bench_forge";

/** Ours and a raw-SQL ceiling on SQLite and on MariaDB; ours is skipped while its backend is not there. */
export async function run(ctx: Ctx): Promise<void> {
  await backend(ctx, "sqlite", async () => {
    mkdirSync(SQLITE_DIR, { recursive: true });
    const file = `${SQLITE_DIR}/forge.db`;
    for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
    const admin = sqliteForgeAdmin(file);
    return {
      raw: new RawSqliteSystem(),
      forge: new ForgeSystem("forge", "@forge/jobs", "sqlite", `sqlite:${file}`, undefined, admin),
      cleanup: async () => admin.close(),
    };
  });
  await backend(ctx, "mariadb", async () => {
    const admin = mariadbForgeAdmin();
    await admin.pool.query(`CREATE DATABASE IF NOT EXISTS \`${FORGE_MARIADB_DB}\``);
    return {
      raw: new RawMariaDbSystem(),
      forge: new ForgeSystem("forge", "@forge/jobs", "mariadb", MARIADB_URL, FORGE_MARIADB_DB, admin),
      cleanup: () => admin.pool.end(),
    };
  });
}

async function backend(
  ctx: Ctx,
  name: "sqlite" | "mariadb",
  make: () => Promise<{ raw: QueueSystem; forge: QueueSystem; cleanup: () => Promise<void> }>,
): Promise<void> {
  let made: Awaited<ReturnType<typeof make>>;
  try {
    made = await make();
    await made.raw.prepare();
  } catch (error) {
    ctx.skip(name, `${name} is not reachable: ${(error as Error).message}`);
    return;
  }
  const systems: QueueSystem[] = [made.raw];
  try {
    await made.forge.prepare();
    systems.unshift(made.forge);
  } catch (error) {
    ctx.skip(`${name} (@forge/jobs)`, error instanceof Unavailable ? `backend not available yet — ${error.message}` : String(error));
  }
  const sizes = { ...ctx.sizes, rounds: Math.min(ctx.sizes.rounds, ctx.sizes.backendRounds) };
  const durability: string[] = [];
  if (name === "sqlite") {
    durability.push(`raw connection synchronous=${(made.raw as RawSqliteSystem).synchronous}`);
    const forgeRaw = (made.forge as ForgeSystem).driver as { pragma?: (s: string, o: { simple: true }) => unknown } | undefined;
    if (forgeRaw?.pragma) durability.push(`@forge/jobs connection synchronous=${synchronousLevel(forgeRaw as never)}`);
  } else {
    const [rows] = await (made.raw as RawMariaDbSystem).query("SELECT @@innodb_flush_log_at_trx_commit AS f, @@version AS v");
    durability.push(`MariaDB ${rows[0]?.v}, innodb_flush_log_at_trx_commit=${rows[0]?.f}`);
  }
  const rowsFor = (describe: (s: QueueSystem) => string) =>
    new Map(systems.map((s): [QueueSystem, Row] => [s, { system: s.id, label: s.label, config: describe(s), samples: {} }]));
  const title = name === "sqlite" ? "SQLite" : "MariaDB";
  const log = (s: string) => process.stdout.write(s);

  const one = rowsFor((s) => (s.id === "forge" ? "enqueue() awaited one after another" : "INSERT awaited one after another"));
  const bulk = rowsFor((s) =>
    s.id === "forge" ? "enqueueMany()" : name === "sqlite" ? "prepared INSERT × N in one transaction" : "INSERT … VALUES ? (N rows)",
  );
  for (let r = 0; r < sizes.rounds; r++) {
    log(`  ${name} enqueue round ${r + 1}:`);
    for (const s of rotate(systems, r)) {
      addSample(one.get(s)!, "jobs/s", (await enqueueOneRun(s, sizes.backendEnqueueOne, null)).rate);
      addSample(bulk.get(s)!, "jobs/s", (await enqueueBulkRun(s, sizes.backendJobs, null)).rate);
      log(` ${s.id} ok`);
    }
    log("\n");
  }
  const base = { unit: "jobs/s", better: "higher" as const, columns: ["jobs/s"], ref: "forge", notes: [`Durability: ${durability.join("; ")}.`] };
  ctx.publish({ ...base, id: `${name}-enqueue-one`, title: `${title}: enqueue one by one (N=${sizes.backendEnqueueOne})`, rows: [...one.values()] });
  ctx.publish({ ...base, id: `${name}-enqueue-bulk`, title: `${title}: bulk enqueue (N=${sizes.backendJobs})`, rows: [...bulk.values()] });

  for (const c of sizes.concurrencies) {
    const proc = rowsFor((s) => s.describe(s.variants.processing[0]!));
    for (let r = 0; r < sizes.rounds; r++) {
      log(`  ${name} processing c=${c} round ${r + 1}:`);
      for (const s of rotate(systems, r)) {
        const res = await processingRun(s, s.variants.processing[0]!, c, sizes.backendJobs, sizes.runTimeoutS, null);
        addSample(proc.get(s)!, "jobs/s", res.rate);
        if (res.timedOut) proc.get(s)!.note = `rate over a ${sizes.runTimeoutS} s window`;
        log(` ${s.id} ${Math.round(res.rate)}`);
      }
      log("\n");
    }
    ctx.publish({
      ...base,
      id: `${name}-processing-c${c}`,
      title: `${title}: processing ${sizes.backendJobs} no-op jobs at concurrency ${c}`,
      rows: [...proc.values()],
    });
  }

  const lat = rowsFor((s) => `${s.describe(s.variants.latency)}; worker concurrency 10`);
  for (let r = 0; r < sizes.rounds; r++) {
    log(`  ${name} latency round ${r + 1}:`);
    for (const s of rotate(systems, r)) {
      const res = await latencyRun(s, sizes.backendLatencySamples, sizes.latencyRate);
      addSample(lat.get(s)!, "p50", res.p50);
      addSample(lat.get(s)!, "p95", res.p95);
      addSample(lat.get(s)!, "p99", res.p99);
      if (res.received < sizes.backendLatencySamples) lat.get(s)!.note = `only ${res.received} arrived within 10 s`;
      log(` ${s.id} ${res.p50.toFixed(1)}/${res.p99.toFixed(1)}`);
    }
    log("\n");
  }
  ctx.publish({
    id: `${name}-latency`,
    title: `${title}: latency enqueue → handler start at ${sizes.latencyRate} jobs/s (${sizes.backendLatencySamples} samples)`,
    unit: "ms",
    better: "lower",
    columns: ["p50", "p95", "p99"],
    ref: "forge",
    rows: [...lat.values()],
    notes: [`${title} has no push channel: a worker learns of a new job by polling (ours: its pollInterval, default 1 s; raw: every 5 ms).`],
  });
  for (const s of systems) await s.close().catch(() => undefined);
  await made.cleanup().catch(() => undefined);
}
