/**
 * Issue 35.6 / the due flag (migration 19): does a crowd of jobs due later cost the workers
 * anything? Per round, on one backend: N ready no-op jobs processed by one worker (concurrency
 * 10, its defaults) on an empty table, then the same N behind S plain jobs due tomorrow (a
 * delayed enqueue, as sleeping jobs and retries waiting out their backoff are stored); the rate
 * of each (from the worker's start to the N-th job's handler), and their ratio. Medians over
 * rounds. The target of issue 35.6: the ratio ≥ 0.95.
 *
 * `tsx src/probe-scheduled.ts --backend=sqlite|mysql|postgres [--waiting] [ready=5000] [scheduled=100000] [rounds=3]`
 * (`--waiting`: the S jobs are `waiting` on one job due tomorrow, as jobs waiting on an event or a child are.)
 * (MariaDB: before each measured run the probe waits, up to 2 min, for InnoDB to purge its undo history,
 * then writes the queue's tables' dirty pages out (FLUSH TABLES … FOR EXPORT) — the crowd is written just
 * before its run, and InnoDB flushes lazily, so that work would otherwise be charged to the crowd — and
 * prints the run's Handler_read_* counts per job.)
 * (BENCH_FORGE_ENTRY=/abs/dist/index.js measures another build, see forge.ts).
 */
import { mkdirSync, rmSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { MARIADB_URL, PG_URL, SQLITE_DIR } from "./lib/env.js";
import { adminClient } from "./lib/metrics.js";
import { ForgeSystem, type ForgeAdmin } from "./systems/forge.js";
import { mariadbForgeAdmin } from "./systems/mariadb-raw.js";
import { pgForgeAdmin } from "./systems/pg-admin.js";
import { sqliteForgeAdmin } from "./systems/sqlite-raw.js";
import { loadForge } from "./forge.js";

const SCHEMA = "probe_scheduled";
const flag = process.argv.find((a) => a.startsWith("--backend="))?.split("=")[1];
const waiting = process.argv.includes("--waiting");
if (flag !== "sqlite" && flag !== "mysql" && flag !== "postgres") throw new Error("--backend=sqlite|mysql|postgres is required");
const [ready = 5000, scheduled = 100_000, rounds = 3] = process.argv
  .slice(2)
  .filter((a) => !a.startsWith("--"))
  .map(Number);

async function system(): Promise<{ forge: ForgeSystem; close: () => Promise<void>; url: string; schema?: string }> {
  if (flag === "sqlite") {
    mkdirSync(SQLITE_DIR, { recursive: true });
    const file = `${SQLITE_DIR}/probe-scheduled.db`;
    for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
    const admin = sqliteForgeAdmin(file);
    return {
      forge: new ForgeSystem("forge", "@forge/jobs", "sqlite", `sqlite:${file}`, undefined, admin),
      close: async () => admin.close(),
      url: `sqlite:${file}`,
    };
  }
  if (flag === "mysql") {
    const admin = mariadbForgeAdmin();
    await admin.pool.query(`DROP DATABASE IF EXISTS \`${SCHEMA}\``);
    await admin.pool.query(`CREATE DATABASE \`${SCHEMA}\``);
    return {
      forge: new ForgeSystem("forge", "@forge/jobs", "mariadb", MARIADB_URL, SCHEMA, admin),
      close: async () => void (await admin.pool.end()),
      url: MARIADB_URL,
      schema: SCHEMA,
    };
  }
  const pgAdmin = await adminClient();
  await pgAdmin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  const admin: ForgeAdmin = pgForgeAdmin(pgAdmin);
  return { forge: new ForgeSystem("forge", "@forge/jobs", "postgres", PG_URL, SCHEMA, admin), close: () => pgAdmin.end(), url: PG_URL, schema: SCHEMA };
}

const { forge: queue, close, url, schema } = await system();
await queue.prepare();
const jobs = await loadForge();
const db = jobs.connect(url, schema ? { schema } : {});

const mariadb = flag === "mysql" ? mariadbForgeAdmin() : null;
const status = async (): Promise<Map<string, number>> => {
  const [rows] = (await mariadb!.pool.query(
    "SELECT VARIABLE_NAME AS name, VARIABLE_VALUE AS value FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME LIKE 'HANDLER_READ%' OR VARIABLE_NAME IN ('INNODB_BUFFER_POOL_PAGES_DIRTY', 'INNODB_BUFFER_POOL_PAGES_DATA', 'INNODB_HISTORY_LIST_LENGTH')",
  )) as unknown as [{ name: string; value: string }[]];
  return new Map(rows.map((r) => [r.name.toLowerCase(), Number(r.value)]));
};
/** MariaDB: waits (at most 2 min) until InnoDB's undo history is purged, then flushes the queue's tables. */
async function innodbSettled(): Promise<string> {
  const t0 = performance.now();
  let history = Infinity;
  while (history >= 1000 && performance.now() - t0 < 120_000) {
    history = (await status()).get("innodb_history_list_length") ?? 0;
    if (history >= 1000) await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  const dirtyBefore = (await status()).get("innodb_buffer_pool_pages_dirty") ?? 0;
  const connection = await mariadb!.pool.getConnection();
  try {
    await connection.query(`FLUSH TABLES \`${SCHEMA}\`.jobs, \`${SCHEMA}\`.jobs_dependencies, \`${SCHEMA}\`.jobs_history FOR EXPORT`);
    await connection.query("UNLOCK TABLES");
  } finally {
    connection.release();
  }
  const dirtyAfter = (await status()).get("innodb_buffer_pool_pages_dirty") ?? 0;
  return `purged after ${((performance.now() - t0) / 1000).toFixed(0)} s (history ${history}), dirty pages ${dirtyBefore} → ${dirtyAfter}`;
}

/** Jobs/s of one worker over `ready` jobs due now. */
async function processReady(): Promise<number> {
  for (let i = 0; i < ready; i += 5000) await queue.enqueueBulk(Array.from({ length: Math.min(5000, ready - i) }, (_, k) => ({ i: i + k })));
  if (mariadb) console.log(`  InnoDB ${await innodbSettled()}`);
  const before = mariadb ? await status() : null;
  let done = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const t0 = performance.now();
  const worker = await queue.startWorker({ concurrency: 10, variant: "default", onJob: () => void (++done === ready && finish()) });
  await finished;
  const ms = performance.now() - t0;
  await worker.stop();
  if (before) {
    const after = await status();
    const reads = [...after].filter(([k]) => k.startsWith("handler_read")).map(([k, v]) => `${k.slice(13)} ${((v - (before.get(k) ?? 0)) / ready).toFixed(1)}`);
    console.log(`  Handler_read per job: ${reads.join(", ")}`);
  }
  return (ready / ms) * 1000;
}

const crowd = waiting ? "waiting (on a job due tomorrow)" : "due tomorrow";
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const empty: number[] = [];
const crowded: number[] = [];
for (let round = 1; round <= rounds; round++) {
  await queue.reset();
  empty.push(await processReady());
  await queue.reset();
  // --waiting: the crowd waits on a job due tomorrow (status waiting, as jobs waiting on an event
  // or a child are), instead of being due tomorrow itself.
  const blocker = waiting ? await jobs.enqueue("noop", {}, { db, availableIn: 86_400 }) : null;
  for (let i = 0; i < scheduled; i += 5000) {
    await jobs.enqueueMany(
      Array.from({ length: Math.min(5000, scheduled - i) }, () =>
        blocker === null ? { task: "noop", payload: {}, availableIn: 86_400 } : { task: "noop", payload: {}, dependsOn: [blocker] },
      ),
      { db },
    );
  }
  crowded.push(await processReady());
  console.log(`round ${round}: empty ${empty.at(-1)!.toFixed(0)} jobs/s, behind ${scheduled} ${crowd} ${crowded.at(-1)!.toFixed(0)} jobs/s`);
}
console.log(
  `${flag}: median empty ${median(empty).toFixed(0)} jobs/s, behind ${scheduled} ${crowd} ${median(crowded).toFixed(0)} jobs/s, ratio ${(median(crowded) / median(empty)).toFixed(2)}`,
);
await db.close();
await queue.close();
await mariadb?.pool.end();
await close();
