import { mkdirSync, rmSync } from "node:fs";
import { loadForge } from "../forge.js";
import { MARIADB_URL, PG_URL, SQLITE_DIR } from "../lib/env.js";
import type { Row } from "../lib/report.js";
import { addSample, type Ctx } from "./common.js";

/**
 * Issue 19: the completion rate of one batch of N items (enqueueBatch with an onComplete
 * callback) against N plain jobs (enqueueMany), the same handler (returns at once), the same
 * in-process worker, on each backend. The clock runs from the worker's start until the last
 * item is done (for the batch: until its callback is claimable). Target: batch ≥ 0.8× plain.
 * BENCH_BATCH_JOBS (default 100,000) and BENCH_BATCH_BACKENDS (default all three) narrow it.
 */
const SCHEMA = "bench_forge_batch";
const CONCURRENCY = 20;

interface Target {
  name: "postgres" | "sqlite" | "mariadb";
  url: () => string;
  schema: string | undefined;
  reset: () => Promise<void>;
}

export async function run(ctx: Ctx): Promise<void> {
  const jobs = Number(process.env.BENCH_BATCH_JOBS ?? 100_000);
  const rounds = Math.max(1, Math.min(ctx.sizes.rounds, 3));
  const targets: Target[] = [
    { name: "postgres", url: () => PG_URL, schema: SCHEMA, reset: () => ctx.admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).then(() => undefined) },
    {
      name: "sqlite",
      url: () => `sqlite:${SQLITE_DIR}/batch.db`,
      schema: undefined,
      reset: async () => {
        mkdirSync(SQLITE_DIR, { recursive: true });
        for (const suffix of ["", "-wal", "-shm"]) rmSync(`${SQLITE_DIR}/batch.db${suffix}`, { force: true });
      },
    },
    { name: "mariadb", url: () => MARIADB_URL, schema: SCHEMA, reset: async () => undefined },
  ];
  const wanted = (process.env.BENCH_BATCH_BACKENDS ?? "postgres,sqlite,mariadb").split(",");
  for (const target of targets.filter((t) => wanted.includes(t.name))) {
    try {
      await measure(ctx, target, jobs, rounds);
    } catch (error) {
      ctx.skip(`batch (${target.name})`, (error as Error).message);
    }
  }
}

async function measure(ctx: Ctx, target: Target, jobs: number, rounds: number): Promise<void> {
  const forge = await loadForge();
  const plain: Row = { system: "plain", label: "enqueueMany", config: `${jobs} jobs, runWorker concurrency ${CONCURRENCY}`, samples: {} };
  const batch: Row = { system: "batch", label: "enqueueBatch + onComplete", config: `one batch of ${jobs} items, same worker`, samples: {} };
  for (let r = 0; r < rounds; r++) {
    // Alternate the order, so neither always runs on the warmer table.
    for (const kind of r % 2 === 0 ? (["plain", "batch"] as const) : (["batch", "plain"] as const)) {
      await target.reset();
      const db = forge.connect(target.url(), { ...(target.schema ? { schema: target.schema } : {}), poolSize: 10 });
      try {
        if (target.name === "mariadb" && target.schema) await db.executor.query(`DROP DATABASE IF EXISTS ${target.schema}`);
        await forge.migrate({ db });
        const rate = await completionRate(forge, db, kind, jobs);
        addSample(kind === "plain" ? plain : batch, "jobs/s", rate);
        process.stdout.write(`  ${target.name} ${kind} round ${r + 1}: ${rate.toFixed(0)} jobs/s\n`);
      } finally {
        await db.close?.();
      }
    }
  }
  ctx.publish({
    id: `batch-${target.name}`,
    title: `Batch completion vs plain jobs (${target.name})`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    ref: "plain",
    rows: [plain, batch],
    notes: [
      `Completion rate of ${jobs} jobs whose handler returns at once, one in-process runWorker (concurrency ${CONCURRENCY}); median of ${rounds} round(s). Target: batch ≥ 0.8× plain.`,
    ],
  });
}

type Forge = Awaited<ReturnType<typeof loadForge>>;
type Db = ReturnType<Forge["connect"]>;

async function completionRate(forge: Forge, db: Db, kind: "plain" | "batch", jobs: number): Promise<number> {
  // Attempts to spare and a long lease: on a loaded machine a stalled heartbeat must not turn a
  // run into a "worker lost" failure, which would never count as a completion.
  const items = Array.from({ length: jobs }, (_, i) => ({ task: "noop", payload: { i }, maxAttempts: 5 }));
  let callbackId: number | null = null;
  if (kind === "plain") {
    for (let from = 0; from < jobs; from += 10_000) await forge.enqueueMany(items.slice(from, from + 10_000), { db });
  } else {
    callbackId = (await forge.enqueueBatch(items, { db, onComplete: { task: "after" } })).callbackId;
  }
  // The same finish line for both: the worker's own count of completions written (a batch's
  // callback is released in the transaction of its last item's completion, so it is
  // claimable by then; checked once after).
  // The same statistics for both: without this, autovacuum analyses the table at a moment that
  // differs between the two enqueues (the batch's writes each row twice), and the claim's plan
  // with it.
  if (db.dialect === "postgres") await db.executor.query(`ANALYZE ${db.table}`);
  const stop = new AbortController();
  let succeeded = 0;
  let resolveAll = (): void => undefined;
  const allDone = new Promise<void>((resolve) => (resolveAll = resolve));
  const started = performance.now();
  const worker = forge.runWorker(
    { noop: () => null },
    {
      db,
      concurrency: CONCURRENCY,
      lease: 120,
      pollInterval: 0.05,
      signal: stop.signal,
      schedules: false,
      events: { "job:succeeded": () => void (++succeeded === jobs && resolveAll()) },
    },
  );
  await allDone;
  const seconds = (performance.now() - started) / 1000;
  stop.abort();
  await worker;
  if (callbackId !== null && (await forge.getJob(callbackId, { db }))?.status !== "pending") throw new Error("the batch's callback was not released");
  return jobs / seconds;
}
