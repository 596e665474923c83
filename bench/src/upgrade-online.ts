/**
 * The online upgrade to the live-only jobs table (issue 33.5), once per backend: a queue as an
 * older version left it, with `rows` ended jobs in its jobs table (packages/jobs/test/helpers/
 * legacy.ts: one every 2.5 s back from now, about 29 UTC days), migrated; then the built
 * `forge-jobs upgrade` runs while a worker (which also upgrades in the background, giving way
 * to the CLI's batches) serves one job at a time, enqueue → done, and a sampler counts the
 * sessions waiting on a lock (PostgreSQL pg_stat_activity, MariaDB innodb_lock_waits).
 * `pnpm --filter @forge/jobs build && tsx src/upgrade-online.ts <postgres|sqlite|mysql> [rows]`.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { loadForge } from "./forge.js";
import { MARIADB_URL, PG_URL } from "./lib/env.js";
import { median, sleep } from "./lib/stats.js";

type Legacy = typeof import("../../packages/jobs/test/helpers/legacy.ts");

const backend = process.argv[2] as "postgres" | "sqlite" | "mysql";
const rows = Number(process.argv[3] ?? 1_000_000);
if (!["postgres", "sqlite", "mysql"].includes(backend)) throw new Error("usage: upgrade-online.ts <postgres|sqlite|mysql> [rows]");
const BIN = fileURLToPath(new URL("../../packages/jobs/bin/forge-jobs.cjs", import.meta.url));
/** Enqueue → done cycles measured before the upgrade, with the legacy rows in place. */
const BASELINE_CYCLES = 200;

const forge = await loadForge();
const { leaveLegacyRows } = (await import(new URL("../../packages/jobs/test/helpers/legacy.ts", import.meta.url).href)) as Legacy;

const schema = backend === "sqlite" ? undefined : `bench_upgrade_${process.pid}`;
const dir = backend === "sqlite" ? mkdtempSync(join(tmpdir(), "forge-upgrade-")) : null;
const url = backend === "postgres" ? PG_URL : backend === "mysql" ? MARIADB_URL : `sqlite:${join(dir!, "jobs.db")}`;

let t0 = performance.now();
await leaveLegacyRows(url, schema, rows, 2.5);
const setupSeconds = (performance.now() - t0) / 1000;
const db = forge.connect(url, schema ? { schema } : {});
const legacyLeft = async () =>
  Number((await db.executor.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${db.table} WHERE status IN ('done', 'failed', 'cancelled')`)).rows[0]!.n);
console.log(`${backend}: ${await legacyLeft()} legacy rows written and migrated in ${setupSeconds.toFixed(1)} s`);

const worker = forge.createWorker({ live: () => undefined }, { db, queue: "live", concurrency: 4, pollInterval: 0.05 });
const working = worker.run();
let workerMoved = 0;
worker.on("worker:error", (e) => console.error(`worker error while ${e.during}:`, e.error));

/** Handlers that returned, by job id: a cycle then waits for its row to read done. */
const succeeded = new Map<number, () => void>();
const early = new Set<number>();
worker.on("job:succeeded", (e) => (succeeded.has(e.job.id) ? succeeded.get(e.job.id)!() : early.add(e.job.id)));

/** One job, enqueue → its row read back done (getJob every millisecond once its handler returned): milliseconds. */
async function cycle(): Promise<number> {
  const started = performance.now();
  const id = await forge.enqueue("live", null, { db, queue: "live" });
  if (!early.delete(id)) await new Promise<void>((resolve) => succeeded.set(id, resolve));
  succeeded.delete(id);
  for (;;) {
    const job = await forge.getJob(id, { db });
    if (job?.status === "done") return performance.now() - started;
    await sleep(1);
  }
}

const baseline: number[] = [];
for (let i = 0; i < BASELINE_CYCLES; i++) baseline.push(await cycle());

// Lock waits: sessions of this database seen waiting on a lock, sampled every 50 ms.
let samples = 0;
let waitingSamples = 0;
let mostWaiting = 0;
const lockWaits =
  backend === "postgres"
    ? `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
    : backend === "mysql"
      ? "SELECT count(*) AS n FROM information_schema.INNODB_LOCK_WAITS"
      : null;
let sampling = true;
const sampler = (async () => {
  if (!lockWaits) return;
  while (sampling) {
    const n = Number((await db.executor.query<{ n: number | string }>(lockWaits)).rows[0]!.n);
    samples++;
    if (n > 0) waitingSamples++;
    mostWaiting = Math.max(mostWaiting, n);
    await sleep(50);
  }
})();

const during: number[] = [];
t0 = performance.now();
const cliDone = new Promise<{ code: number | null; out: string }>((resolve) => {
  const child = spawn(process.execPath, [BIN, "upgrade", "--database-url", url, ...(schema ? ["--schema", schema] : [])], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.on("close", (code) => resolve({ code, out }));
});
let upgrading = true;
const measuring = (async () => {
  while (upgrading) during.push(await cycle());
})();
const cli = await cliDone;
const seconds = (performance.now() - t0) / 1000;
upgrading = false;
sampling = false;
await measuring;
await sampler;
await worker.stop();
await working;
const left = await legacyLeft();
const cliMoved = Number(/moved (\d+) ended/.exec(cli.out)?.[1] ?? NaN);
workerMoved = rows - left - cliMoved;
console.log(cli.out.trim());
const ms = (values: number[]) => `median ${median(values).toFixed(1)} ms, max ${Math.max(...values).toFixed(1)} ms (${values.length} cycles)`;
console.log(
  [
    `${backend}: ${rows} legacy rows upgraded in ${seconds.toFixed(1)} s (${Math.round(rows / seconds)} rows/s; the CLI moved ${cliMoved}, the worker's background pass ${workerMoved}); exit ${cli.code}; left ${left}`,
    `enqueue → done before: ${ms(baseline)}`,
    `enqueue → done during: ${ms(during)}`,
    lockWaits
      ? `lock waits: ${waitingSamples} of ${samples} samples saw a session waiting on a lock (most at once: ${mostWaiting})`
      : "lock waits: SQLite has one writer (the cycles above wait for it)",
  ].join("\n"),
);
if (backend === "postgres") await db.executor.query(`DROP SCHEMA "${schema}" CASCADE`);
if (backend === "mysql") await db.executor.query(`DROP DATABASE \`${schema}\``);
await db.close();
if (dir) rmSync(dir, { recursive: true, force: true });
