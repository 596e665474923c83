/**
 * Throughput of @forge/jobs straight to PostgreSQL and through PgBouncer in transaction mode
 * (tools/test-services/pgbouncer.sh start), on the same server, rounds alternating: enqueueMany
 * of `jobs` no-op jobs, then one worker (concurrency 10, LISTEN on the direct URL) until all are
 * done. Prints each round and the medians (jobs/s). Measures, never asserts.
 * `tsx src/probe-pooler.ts [jobs] [rounds]`.
 */
import { performance } from "node:perf_hooks";
import { loadForge } from "./forge.js";
import { PG_URL } from "./lib/env.js";

const jobs = Number(process.argv[2] ?? 5000);
const rounds = Number(process.argv[3] ?? 3);
const POOLED = process.env.BENCH_PGBOUNCER_URL ?? "postgres://postgres@127.0.0.1:16432/test?pgbouncer=true";
const SCHEMA = "bench_forge_pooler";
const forge = await loadForge();

async function round(url: string): Promise<{ enqueue: number; process: number }> {
  const db = forge.connect(url, { schema: SCHEMA, listenUrl: PG_URL });
  try {
    await forge.migrate({ db });
    await db.executor.query(`DELETE FROM ${db.table}`);
    const items = Array.from({ length: jobs }, (_, i) => ({ task: "noop", payload: { i } }));
    let t0 = performance.now();
    for (let i = 0; i < items.length; i += 500) await forge.enqueueMany(items.slice(i, i + 500), { db });
    const enqueue = jobs / ((performance.now() - t0) / 1000);
    const stop = new AbortController();
    t0 = performance.now();
    const worker = forge.createWorker({ noop: () => null }, { db, concurrency: 10, signal: stop.signal, schedules: false });
    let done = 0;
    worker.on("job:succeeded", () => {
      if (++done === jobs) stop.abort();
    });
    await worker.run();
    return { enqueue, process: jobs / ((performance.now() - t0) / 1000) };
  } finally {
    await db.close();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results: Record<"direct" | "pgbouncer", { enqueue: number; process: number }[]> = { direct: [], pgbouncer: [] };
for (let r = 0; r < rounds; r++) {
  for (const [name, url] of [
    ["direct", PG_URL],
    ["pgbouncer", POOLED],
  ] as const) {
    const result = await round(url);
    results[name].push(result);
    console.log(`round ${r + 1} ${name}: enqueueMany ${result.enqueue.toFixed(0)} jobs/s, processing ${result.process.toFixed(0)} jobs/s`);
  }
}
for (const name of ["direct", "pgbouncer"] as const) {
  const rs = results[name];
  console.log(
    `median ${name}: enqueueMany ${median(rs.map((r) => r.enqueue)).toFixed(0)} jobs/s, processing ${median(rs.map((r) => r.process)).toFixed(0)} jobs/s`,
  );
}
const ratio = (key: "enqueue" | "process") => median(results.pgbouncer.map((r) => r[key])) / median(results.direct.map((r) => r[key]));
console.log(`pgbouncer / direct: enqueueMany ${ratio("enqueue").toFixed(2)}x, processing ${ratio("process").toFixed(2)}x`);
const admin = forge.connect(PG_URL);
await admin.executor.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await admin.close();
