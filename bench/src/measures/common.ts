import { performance } from "node:perf_hooks";
import type pg from "pg";
import type { Sizes } from "../lib/env.js";
import { costs, snapshot, waitQuiet, type Costs } from "../lib/metrics.js";
import type { Results, Row, Table } from "../lib/report.js";
import { percentile, sleep, sorted } from "../lib/stats.js";
import type { Payload, QueueSystem } from "../systems/types.js";

export interface Ctx {
  sizes: Sizes;
  /** Harness connection to PostgreSQL (not counted as anyone's statements). */
  admin: pg.Client;
  results: Results;
  previous: Results | null;
  publish(table: Table): void;
  skip(measure: string, reason: string): void;
}

export const payloads = (n: number, from = 0): Payload[] => Array.from({ length: n }, (_, k) => ({ i: from + k }));

export function addSample(row: Row, column: string, v: number): void {
  (row.samples[column] ??= []).push(v);
}

export function addCosts(row: Row, c: Costs | null): void {
  if (!c) return;
  addSample(row, "stmts/job", c.statementsPerJob);
  addSample(row, "node µs/job", c.nodeCpuUsPerJob);
  addSample(row, "pg µs/job", c.pgCpuUsPerJob);
  addSample(row, "WAL B/job", c.walBytesPerJob);
}

export const COST_COLUMNS = ["stmts/job", "node µs/job", "pg µs/job", "WAL B/job"];

let quietWaitMs = 15_000;
export function setQuietWait(ms: number): void {
  quietWaitMs = ms;
}

/**
 * Before each measured run: a checkpoint (so no run pays another's full-page writes) and a
 * wait for the machine to be idle (other people's tests share these 2 cores).
 */
export async function settle(admin: pg.Client | null): Promise<void> {
  if (admin) await admin.query("CHECKPOINT");
  await waitQuiet(quietWaitMs);
}

export interface ProcessingResult {
  /** Jobs/s from the first handler call until no job is unfinished. */
  rate: number;
  /** Jobs/s from the call that starts the worker until no job is unfinished: what a user measures (worker start-up included). */
  rateFromStart: number;
  processed: number;
  timedOut: boolean;
  costs: Costs | null;
}

/**
 * `n` no-op jobs enqueued in bulk (not timed), then a worker started: jobs/s until the database
 * has no unfinished job left (all completions written), from the worker's start and from the
 * first handler call.
 */
export async function processingRun(
  sys: QueueSystem,
  variant: string,
  concurrency: number,
  n: number,
  timeoutS: number,
  admin: pg.Client | null,
): Promise<ProcessingResult> {
  await sys.reset();
  for (let i = 0; i < n; i += 5000) await sys.enqueueBulk(payloads(Math.min(5000, n - i), i));
  await settle(admin && sys.backend === "postgres" ? admin : null);
  let seen = 0;
  let first = 0;
  let allSeen!: () => void;
  const everyJob = new Promise<void>((r) => (allSeen = r));
  const onJob = () => {
    if (seen++ === 0) first = performance.now();
    if (seen === n) allSeen();
  };
  const before = admin && sys.backend === "postgres" ? await snapshot(admin) : null;
  const deadline = performance.now() + timeoutS * 1000;
  const started = performance.now();
  const worker = await sys.startWorker({ concurrency, variant, onJob });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([everyJob, new Promise((r) => (timer = setTimeout(r, timeoutS * 1000)))]);
  clearTimeout(timer);
  let left = await sys.unfinished();
  while (left > 0 && performance.now() < deadline) {
    await sleep(5);
    left = await sys.unfinished();
  }
  const end = performance.now();
  const after = before && admin ? await snapshot(admin) : null;
  await worker.stop();
  const processed = n - left;
  return {
    rate: first ? processed / ((end - first) / 1000) : 0,
    rateFromStart: processed / ((end - started) / 1000),
    processed,
    timedOut: left > 0,
    costs: before && after && admin ? await costs(admin, before, after, Math.max(1, processed)) : null,
  };
}

export interface LatencyResult {
  p50: number;
  p95: number;
  p99: number;
  received: number;
}

/**
 * Open loop at `rate` jobs/s: the clock starts before the enqueue call (so the enqueue's own
 * commit is included) and stops when the handler is called, in this same process.
 */
export async function latencyRun(
  sys: QueueSystem,
  samples: number,
  rate: number,
  enqueue: (p: Payload) => Promise<void> = (p) => sys.enqueueOne(p),
  concurrency = 10,
): Promise<LatencyResult> {
  const warmup = 20;
  const total = samples + warmup;
  await sys.reset();
  await settle(null);
  const sentAt = new Float64Array(total);
  const latency = new Float64Array(total).fill(NaN);
  let received = 0;
  let allIn!: () => void;
  const done = new Promise<void>((r) => (allIn = r));
  const worker = await sys.startWorker({
    concurrency,
    variant: sys.variants.latency,
    onJob: (p) => {
      latency[p.i] = performance.now() - sentAt[p.i]!;
      if (++received === total) allIn();
    },
  });
  await sleep(300);
  const interval = 1000 / rate;
  const start = performance.now();
  const failures: unknown[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    sentAt[i] = performance.now();
    enqueue({ i }).catch((e) => failures.push(e));
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([done, new Promise((r) => (timer = setTimeout(r, 10_000)))]);
  clearTimeout(timer);
  await worker.stop();
  if (failures.length) throw failures[0];
  const measured = sorted(Array.from(latency.subarray(warmup)).filter((v) => Number.isFinite(v)));
  return { p50: percentile(measured, 50), p95: percentile(measured, 95), p99: percentile(measured, 99), received: measured.length };
}

/** Jobs/s of `count` sequential awaited enqueues (after 20 untimed ones warm the connections). */
export async function enqueueOneRun(sys: QueueSystem, count: number, admin: pg.Client | null): Promise<{ rate: number; costs: Costs | null }> {
  await sys.reset();
  for (let i = 0; i < 20; i++) await sys.enqueueOne({ i: -1 });
  await settle(admin && sys.backend === "postgres" ? admin : null);
  const before = admin && sys.backend === "postgres" ? await snapshot(admin) : null;
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await sys.enqueueOne({ i });
  const seconds = (performance.now() - t0) / 1000;
  const after = before && admin ? await snapshot(admin) : null;
  return { rate: count / seconds, costs: before && after && admin ? await costs(admin, before, after, count) : null };
}

/** Jobs/s of one bulk call of `count` jobs (the payload array is built before the clock starts). */
export async function enqueueBulkRun(sys: QueueSystem, count: number, admin: pg.Client | null): Promise<{ rate: number; costs: Costs | null }> {
  await sys.reset();
  await sys.enqueueBulk(payloads(100)); // warm: prepared statements, pool connections
  await sys.reset();
  await settle(admin && sys.backend === "postgres" ? admin : null);
  const items = payloads(count);
  const before = admin && sys.backend === "postgres" ? await snapshot(admin) : null;
  const t0 = performance.now();
  await sys.enqueueBulk(items);
  const seconds = (performance.now() - t0) / 1000;
  const after = before && admin ? await snapshot(admin) : null;
  return { rate: count / seconds, costs: before && after && admin ? await costs(admin, before, after, count) : null };
}
