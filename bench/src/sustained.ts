// Sustained load on PostgreSQL: one worker, a producer offering a fixed rate for a while, then
// nothing, and the worker watched in windows until its backlog is gone. What issue 31 asked to
// keep: a worker that ran 1,000 jobs/s for a minute or two, then 0 for good, once its
// completion's cached plan walked the whole table on every batch.
//
//   tsx src/sustained.ts [--rate=1000] [--seconds=240] [--recovery=60] [--autovacuum=off|on]
//                        [--concurrency=16] [--window=5] [--json=results/sustained.json]
//
// --autovacuum=on turns the server's autovacuum on for the run (ALTER SYSTEM, reloaded, put
// back as it was at the end) and the jobs table's own autovacuum_enabled; off turns the
// table's off, which is what a server whose autovacuum is off or held back looks like.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import pg from "pg";
import { loadForge } from "./forge.js";
import { median, percentile, sleep, sorted } from "./lib/stats.js";

const { values: args } = parseArgs({
  options: {
    rate: { type: "string", default: "1000" },
    seconds: { type: "string", default: "240" },
    recovery: { type: "string", default: "60" },
    autovacuum: { type: "string", default: "off" },
    concurrency: { type: "string", default: "16" },
    window: { type: "string", default: "5" },
    json: { type: "string" },
  },
});
const rate = Number(args.rate);
const seconds = Number(args.seconds);
const recovery = Number(args.recovery);
const concurrency = Number(args.concurrency);
const windowS = Number(args.window);
const url = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = "bench_sustained";
const TICK_MS = 20;

interface Window {
  t: number;
  offered: number;
  completed: number;
  pickupP50: number | null;
  pickupP99: number | null;
  backlog: number;
  running: number;
}

async function main(): Promise<void> {
  const forge = await loadForge();
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.query(`CREATE SCHEMA ${schema}`);
  const db = forge.connect(url, { schema });
  await forge.migrate({ db });
  const table = `${schema}.jobs`;
  const on = args.autovacuum === "on";
  await admin.query(`ALTER TABLE ${table} SET (autovacuum_enabled = ${on ? "true" : "false"})`);
  const serverBefore = (await admin.query<{ autovacuum: string }>("SHOW autovacuum")).rows[0]!.autovacuum;
  if (on && serverBefore !== "on") {
    await admin.query("ALTER SYSTEM SET autovacuum = on");
    await admin.query("SELECT pg_reload_conf()");
    await sleep(500);
  }
  const server = (await admin.query<{ autovacuum: string }>("SHOW autovacuum")).rows[0]!.autovacuum;
  const putBack = async () => {
    if (on && serverBefore !== "on") {
      await admin.query("ALTER SYSTEM RESET autovacuum");
      await admin.query("SELECT pg_reload_conf()");
    }
  };

  const pickups: number[] = [];
  let completed = 0;
  let offered = 0;
  const controller = new AbortController();
  const worker = forge.runWorker(
    {
      sustained: async (payload: unknown) => {
        pickups.push(Date.now() - (payload as { at: number }).at);
        await new Promise((resolve) => setTimeout(resolve, 1));
        completed++;
      },
    },
    { db, concurrency, signal: controller.signal },
  );

  const perTick = rate * (TICK_MS / 1000);
  let owed = 0;
  const started = Date.now();
  const producing = setInterval(() => {
    if (Date.now() - started >= seconds * 1000) return;
    owed += perTick;
    const n = Math.floor(owed);
    owed -= n;
    if (n === 0) return;
    const at = Date.now();
    offered += n;
    forge
      .enqueueMany(
        Array.from({ length: n }, () => ({ task: "sustained", payload: { at } })),
        { db },
      )
      .catch((error: unknown) => {
        console.error("enqueue failed:", (error as Error).message);
      });
  }, TICK_MS);

  const windows: Window[] = [];
  console.log(
    `sustained: ${rate} jobs/s offered for ${seconds} s, concurrency ${concurrency}, server autovacuum ${server}, table autovacuum ${args.autovacuum}`,
  );
  console.log("    t  offered/s  done/s  pickup p50  p99 (ms)   backlog  running");
  let lastOffered = 0;
  let lastCompleted = 0;
  for (;;) {
    await sleep(windowS * 1000);
    const t = Math.round((Date.now() - started) / 1000);
    const sample = pickups.splice(0);
    const counts = await admin.query<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM ${table} WHERE status IN ('pending', 'running') GROUP BY status`,
    );
    const count = (s: string) => Number(counts.rows.find((r) => r.status === s)?.n ?? 0);
    const w: Window = {
      t,
      offered: (offered - lastOffered) / windowS,
      completed: (completed - lastCompleted) / windowS,
      pickupP50: sample.length ? percentile(sorted(sample), 50) : null,
      pickupP99: sample.length ? percentile(sorted(sample), 99) : null,
      backlog: count("pending"),
      running: count("running"),
    };
    lastOffered = offered;
    lastCompleted = completed;
    windows.push(w);
    const ms = (v: number | null) => (v === null ? "-" : v.toFixed(0)).padStart(10);
    console.log(
      `${String(t).padStart(5)}  ${w.offered.toFixed(0).padStart(9)}  ${w.completed.toFixed(0).padStart(6)}  ${ms(w.pickupP50)}  ${ms(w.pickupP99)}  ${String(w.backlog).padStart(8)}  ${String(w.running).padStart(7)}`,
    );
    const done = t >= seconds && w.backlog === 0 && w.running === 0;
    if (done || t >= seconds + recovery) break;
  }
  clearInterval(producing);
  controller.abort();
  await worker;
  const loaded = windows.filter((w) => w.t <= seconds);
  const summary = {
    rate,
    seconds,
    concurrency,
    autovacuum: { server, table: args.autovacuum },
    medianDonePerS: median(loaded.map((w) => w.completed)),
    lowestDonePerS: Math.min(...loaded.map((w) => w.completed)),
    pickupP99Max: Math.max(...windows.map((w) => w.pickupP99 ?? 0)),
    drainedAfterS: windows.at(-1)!.backlog === 0 && windows.at(-1)!.running === 0 ? windows.at(-1)!.t - seconds : null,
    windows,
  };
  console.log(
    `median ${summary.medianDonePerS} done/s, lowest window ${summary.lowestDonePerS}, worst pickup p99 ${summary.pickupP99Max} ms, ` +
      (summary.drainedAfterS === null
        ? `backlog not drained ${recovery} s after the load stopped`
        : `drained ${summary.drainedAfterS} s after the load stopped`),
  );
  if (args.json) writeFileSync(args.json, JSON.stringify(summary, null, 2) + "\n");
  await db.close();
  await putBack();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
}

await main();
