/**
 * Issue 35.6: what durable steps cost, and what waiting jobs cost a sendEvent. On one backend:
 *
 * 1. Per step: N jobs of three `ctx.step` each (each step's result saved, fenced by the claim
 *    token) against N plain no-op jobs, one worker (concurrency 10, its defaults), 3 rounds,
 *    medians; the overhead per step = (time with steps − time plain) ÷ (3 N).
 * 2. `--events`: W jobs waiting on `ctx.waitForEvent` for distinct keys, then `sendEvent` to one
 *    of them, S times (a new key each time, so every send wakes one waiter): p50 / p99 per send.
 *
 * `tsx src/probe-steps.ts --backend=sqlite|mysql|postgres [jobs=2000] [--events[=waiters]] [sends=200]`
 */
import { mkdirSync, rmSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { MARIADB_URL, PG_URL, SQLITE_DIR } from "./lib/env.js";
import { loadForge } from "./forge.js";
import { adminClient } from "./lib/metrics.js";
import { mariadbForgeAdmin } from "./systems/mariadb-raw.js";

const SCHEMA = "probe_steps";
const flag = process.argv.find((a) => a.startsWith("--backend="))?.split("=")[1];
if (flag !== "sqlite" && flag !== "mysql" && flag !== "postgres") throw new Error("--backend=sqlite|mysql|postgres is required");
const eventsFlag = process.argv.find((a) => a.startsWith("--events"));
const [jobs = 2000, sends = 200] = process.argv
  .slice(2)
  .filter((a) => !a.startsWith("--"))
  .map(Number);
const waiters = eventsFlag ? Number(eventsFlag.split("=")[1] ?? 100_000) : 0;

const forge = await loadForge();
let url: string;
let options: { schema?: string } = {};
if (flag === "sqlite") {
  mkdirSync(SQLITE_DIR, { recursive: true });
  const file = `${SQLITE_DIR}/probe-steps.db`;
  for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
  url = `sqlite:${file}`;
} else if (flag === "mysql") {
  const admin = mariadbForgeAdmin();
  await admin.pool.query(`DROP DATABASE IF EXISTS \`${SCHEMA}\``);
  await admin.pool.query(`CREATE DATABASE \`${SCHEMA}\``);
  await admin.pool.end();
  url = MARIADB_URL;
  options = { schema: SCHEMA };
} else {
  const admin = await adminClient();
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await admin.end();
  url = PG_URL;
  options = { schema: SCHEMA };
}
const db = forge.connect(url, options);
await forge.migrate({ db });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;

/** Milliseconds for one worker to run `jobs` jobs of `task`. */
async function run(task: string, handlers: Parameters<typeof forge.createWorker>[0]): Promise<number> {
  const queue = `${task}_${Math.random().toString(36).slice(2, 8)}`;
  for (let i = 0; i < jobs; i += 1000) {
    await forge.enqueueMany(
      Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ task, payload: { i: i + k } })),
      { db, queue },
    );
  }
  let done = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const controller = new AbortController();
  const worker = forge.createWorker(handlers, { db, queue, concurrency: 10, signal: controller.signal });
  worker.on("job:succeeded", () => void (++done === jobs && finish()));
  const t0 = performance.now();
  const running = worker.run();
  await finished;
  const ms = performance.now() - t0;
  controller.abort();
  await running;
  return ms;
}

if (!eventsFlag) {
  const plain: number[] = [];
  const stepped: number[] = [];
  for (let round = 1; round <= 3; round++) {
    plain.push(await run("plain", { plain: () => undefined }));
    stepped.push(
      await run("stepped", {
        stepped: async (_payload: unknown, ctx) => {
          await ctx.step("one", () => 1);
          await ctx.step("two", () => ({ two: 2 }));
          await ctx.step("three", () => "three");
        },
      }),
    );
    console.log(`round ${round}: plain ${plain.at(-1)!.toFixed(0)} ms, three steps ${stepped.at(-1)!.toFixed(0)} ms for ${jobs} jobs`);
  }
  const p = median(plain);
  const s = median(stepped);
  console.log(
    `${flag}: ${jobs} jobs, plain ${((jobs / p) * 1000).toFixed(0)} jobs/s, three steps ${((jobs / s) * 1000).toFixed(0)} jobs/s; overhead per step ${(((s - p) / (3 * jobs)) * 1000).toFixed(0)} µs of wall time (concurrency 10)`,
  );
} else {
  // W waiters: each job waits for "activated" with its own key, so a send wakes exactly one.
  const queue = "waiters";
  for (let i = 0; i < waiters; i += 5000) {
    await forge.enqueueMany(
      Array.from({ length: Math.min(5000, waiters - i) }, (_, k) => ({ task: "wait", payload: { key: `k${i + k}` } })),
      { db, queue },
    );
  }
  let waiting = 0;
  let allWaiting!: () => void;
  const ready = new Promise<void>((resolve) => (allWaiting = resolve));
  const controller = new AbortController();
  const worker = forge.createWorker(
    {
      wait: async (payload: { key: string }, ctx) => {
        await ctx.waitForEvent("activation", { event: "activated", key: payload.key, timeout: 86_400 });
      },
    },
    { db, queue, concurrency: 50, signal: controller.signal },
  );
  worker.on("job:slept", () => void (++waiting === waiters && allWaiting()));
  const t0 = performance.now();
  const running = worker.run();
  await Promise.race([ready, new Promise((resolve) => setTimeout(resolve, 600_000))]);
  console.log(`${waiting} of ${waiters} jobs waiting after ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  controller.abort();
  await running;
  const times: number[] = [];
  for (let i = 0; i < sends; i++) {
    const key = `k${Math.floor((i * waiters) / sends)}`;
    const s0 = performance.now();
    await forge.sendEvent("activated", { i }, { key, db });
    times.push(performance.now() - s0);
  }
  console.log(
    `${flag}: sendEvent to one of ${waiters} waiters, ${sends} sends: p50 ${quantile(times, 0.5).toFixed(2)} ms, p99 ${quantile(times, 0.99).toFixed(2)} ms`,
  );
}
await db.close();
