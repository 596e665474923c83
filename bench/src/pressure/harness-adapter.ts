/**
 * @forge/jobs as an adapter of the public harness hardbyte/postgresql-job-queue-benchmarking: its
 * CONTRIBUTING_ADAPTERS.md JSONL protocol on stdout (a descriptor, then every SAMPLE_EVERY_S the
 * claim percentiles over a rolling 30 s, enqueue and completion rates and the queue depth), the
 * same producer and worker as our pressure cells (load.ts). Run it natively:
 *
 *   DATABASE_URL=postgres://… PRODUCER_RATE=1000 WORKER_COUNT=16 JOB_WORK_MS=1 \
 *     node --import tsx bench/src/pressure/harness-adapter.ts
 *
 * PRODUCER_RATE_CONTROL_FILE (the harness's high-load phase) is read at every sample.
 * queue_depth counts jobs not finished, running ones included (the bench's unfinished()).
 */
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const env = (name: string, fallback: string) => process.env[name] ?? fallback;
const url = env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/forge_bench");
const baseRate = Number(env("PRODUCER_RATE", "800"));
const sampleEveryS = Number(env("SAMPLE_EVERY_S", "5"));
const ROLLING_S = 30;
/** Pickups kept for the rolling percentiles; the oldest go first beyond it (bounded memory). */
const RING = 32768;

process.env.BENCH_PG_URL = url;
const { openTarget } = await import("./systems.js");
const { startLoad } = await import("./load.js");
const { percentile } = await import("../lib/stats.js");

const emit = (record: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(record)}\n`);

function controlledRate(): number {
  const path = process.env.PRODUCER_RATE_CONTROL_FILE;
  if (!path) return baseRate;
  try {
    const value = Number.parseFloat(readFileSync(path, "utf8").trim());
    return Number.isFinite(value) ? value : baseRate;
  } catch {
    return baseRate;
  }
}

const target = await openTarget("forge", "default");
const load = await startLoad(target.system, {
  rate: controlledRate(),
  workMs: Number(env("JOB_WORK_MS", "1")),
  concurrency: Number(env("WORKER_COUNT", "16")),
  variant: target.workerVariant,
});
emit({
  kind: "descriptor",
  system: "forge",
  // As adapter.json names them: the harness checks the descriptor against the manifest.
  event_tables: target.hot.map((t) => t.replaceAll('"', "")),
  extensions: [],
  version: `@forge/jobs (${env("FORGE_VERSION", "work tree")})`,
  schema_version: null,
  db_name: new URL(url).pathname.slice(1),
  started_at: new Date().toISOString(),
});

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  setTimeout(() => process.exit(0), 4500).unref();
  await load.stop();
  await target.system.close();
  await target.admin.end();
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
process.on("SIGINT", () => void stop());

// Clock-aligned ticks, so samples of every adapter line up on the harness's time base.
const period = sampleEveryS * 1000;
await new Promise((r) => setTimeout(r, period - (Date.now() % period)));
const ring: { at: number; ms: number }[] = [];
let last = performance.now();
load.take();
while (!stopping) {
  await new Promise((r) => setTimeout(r, period - (Date.now() % period)));
  if (stopping) break;
  const now = performance.now();
  const elapsed = (now - last) / 1000;
  last = now;
  const w = load.take();
  for (const ms of w.pickups) ring.push({ at: now, ms });
  if (ring.length > RING) ring.splice(0, ring.length - RING);
  const recent = ring
    .filter((p) => p.at >= now - ROLLING_S * 1000)
    .map((p) => p.ms)
    .sort((a, b) => a - b);
  const q = (p: number) => (recent.length ? percentile(recent, p) : 0);
  const depth = await target.system.unfinished();
  const rate = controlledRate();
  load.setRate(rate);
  const t = new Date().toISOString();
  const metrics: [string, number, number][] = [
    ["claim_p50_ms", q(50), ROLLING_S],
    ["claim_p95_ms", q(95), ROLLING_S],
    ["claim_p99_ms", q(99), ROLLING_S],
    ["enqueue_rate", w.enqueued / elapsed, sampleEveryS],
    ["completion_rate", w.completed / elapsed, sampleEveryS],
    ["queue_depth", depth, 0],
    ["producer_target_rate", rate, 0],
  ];
  for (const [metric, value, window_s] of metrics) emit({ t, system: "forge", kind: "adapter", subject_kind: "adapter", subject: "", metric, value, window_s });
}
