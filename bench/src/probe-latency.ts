/**
 * Where the enqueue → handler-start time of @forge/jobs goes, one job at a time at 50/s:
 * enqueue round trip (INSERT + NOTIFY, committed), NOTIFY arrival at an independent listener,
 * and the handler call. `tsx src/probe-latency.ts [samples]`.
 */
import pg from "pg";
import { performance } from "node:perf_hooks";
import { loadForge } from "./forge.js";
import { PG_URL, SCHEMA } from "./lib/env.js";
import { percentile, sleep, sorted } from "./lib/stats.js";

const samples = Number(process.argv[2] ?? 300);
const forge = await loadForge();
const db = forge.connect(PG_URL, { schema: SCHEMA.forge });
await forge.migrate({ db });
const admin = new pg.Client({ connectionString: PG_URL });
await admin.connect();
await admin.query(`TRUNCATE ${db.table}`);
const listener = new pg.Client({ connectionString: PG_URL });
await listener.connect();
await listener.query(`LISTEN "${db.channel}"`);
const sent = new Float64Array(samples);
const acked = new Float64Array(samples);
const notified = new Float64Array(samples);
const started = new Float64Array(samples);
let current = -1;
listener.on("notification", () => {
  if (current >= 0 && !notified[current]) notified[current] = performance.now();
});
const workerDb = forge.connect(PG_URL, { schema: SCHEMA.forge });
const controller = new AbortController();
const running = forge.runWorker(
  { noop: (p: { i: number }) => void (started[p.i] = performance.now()) },
  { db: workerDb, concurrency: 10, signal: controller.signal },
);
await sleep(500);
for (let i = 0; i < samples; i++) {
  current = i;
  sent[i] = performance.now();
  await forge.enqueue("noop", { i }, { db });
  acked[i] = performance.now();
  await sleep(20);
}
await sleep(200);
controller.abort();
await running;
const show = (label: string, values: number[]) => {
  const s = sorted(values.filter(Number.isFinite).filter((v) => v > 0));
  console.log(`${label.padEnd(36)} p50 ${percentile(s, 50).toFixed(2)}  p95 ${percentile(s, 95).toFixed(2)}  p99 ${percentile(s, 99).toFixed(2)} ms`);
};
const idx = [...Array(samples).keys()].slice(20);
show(
  "enqueue round trip (commit acked)",
  idx.map((i) => acked[i]! - sent[i]!),
);
show(
  "sent → NOTIFY at another listener",
  idx.map((i) => notified[i]! - sent[i]!),
);
show(
  "sent → handler start",
  idx.map((i) => started[i]! - sent[i]!),
);
show(
  "NOTIFY → handler start",
  idx.map((i) => started[i]! - notified[i]!),
);
await Promise.all([db.close(), workerDb.close(), admin.end(), listener.end()]);
