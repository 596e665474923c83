import { performance } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import { SCHEMA, type Sizes } from "../lib/env.js";
import type { Row } from "../lib/report.js";
import { percentile, rotate, sleep, sorted } from "../lib/stats.js";
import { FlowForge, FlowGraphile, FlowPgBoss, type FlowJob, type FlowSystem } from "../systems/flow.js";
import { Unavailable } from "../systems/types.js";
import { addSample, settle, type Ctx } from "./common.js";
import { BACKEND_TITLE, BACKENDS, forgeTarget, type ForgeTarget } from "./flow-backends.js";
import { costOfFlowControl, rateAccuracy } from "./flow-limits.js";

/** The issue's scenario: ten small tenants at 10 jobs/s each, 5 ms handlers, one worker at concurrency 10. */
export const SMALL_TENANTS = 10;
export const SMALL_RATE = 10;
export const HANDLER_MS = 5;
export const CONCURRENCY = 10;
/** A's backlog runs this long before the small tenants start (pools warm, steady state). */
const WARMUP_MS = 1000;

/** Flow control (issue 14): noisy neighbour, rate-limit accuracy, cost; on every backend reachable. */
export async function run(ctx: Ctx): Promise<void> {
  const targets: ForgeTarget[] = [];
  for (const backend of BACKENDS) {
    try {
      targets.push(await forgeTarget(ctx.admin, backend, SCHEMA.forgeFlow));
    } catch (error) {
      ctx.skip(`flow (${backend})`, `${backend} is not reachable: ${(error as Error).message}`);
    }
  }
  const timed = async (label: string, step: () => Promise<void>) => {
    const t0 = Date.now();
    await step();
    console.log(`   (flow ${label}: ${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  };
  // BENCH_FLOW_PARTS (default all three) picks the parts; a partial run keeps the other tables.
  const parts = (process.env.BENCH_FLOW_PARTS ?? "noisy,rate,cost").split(",");
  if (parts.includes("noisy")) for (const target of targets) await timed(`noisy neighbour ${target.backend}`, () => noisyNeighbour(ctx, target));
  if (parts.includes("rate")) await timed("rate limit", () => rateAccuracy(ctx, targets));
  if (parts.includes("cost")) await timed("cost", () => costOfFlowControl(ctx));
  for (const target of targets) await target.cleanup().catch(() => undefined);
}

interface NoisyResult {
  /** Small tenants' waits in ms (handler start − enqueue call start); a job not started by the cut counts the time to the cut. */
  waits: number[];
  censored: number;
  /** A's handler starts per second over the window. */
  aRate: number;
  aRanOut: boolean;
  failures: number;
}

/**
 * A's backlog enqueued in bulk (untimed), the worker started, and after a warm-up the small
 * tenants' jobs one by one, open loop and evenly spread (tenant k's j-th job at j/rate + k/(10·rate)
 * seconds). The window runs from the first small enqueue until the last small job starts, or is
 * cut `flowGraceS` after the last enqueue. Without small tenants ("A alone") the window is as
 * long as the small tenants' enqueues would have lasted.
 */
async function noisyRun(sys: FlowSystem, sizes: Sizes, flow: boolean, withSmall: boolean, ctx: Ctx): Promise<NoisyResult> {
  const backlog = sizes.flowBacklog;
  await sys.reset();
  for (let i = 0; i < backlog; i += 5000)
    await sys.enqueueBulk(
      Array.from({ length: Math.min(5000, backlog - i) }, (_, k) => ({ i: i + k, t: 0 })),
      flow,
    );
  await settle(sys.backend === "postgres" ? ctx.admin : null);
  const small = withSmall ? SMALL_TENANTS * sizes.flowSmallJobs : 0;
  const sentAt = new Float64Array(small).fill(NaN);
  const startedAt = new Float64Array(small).fill(NaN);
  let aStarted = 0;
  let smallStarted = 0;
  let end = 0;
  let aAtEnd = 0;
  let allSmall!: () => void;
  const smallDone = new Promise<void>((resolve) => (allSmall = resolve));
  const handler = async (job: FlowJob) => {
    if (job.t === 0) aStarted++;
    else if (Number.isNaN(startedAt[job.i]!)) {
      startedAt[job.i] = performance.now();
      if (++smallStarted === small) {
        end = performance.now();
        aAtEnd = aStarted;
        allSmall();
      }
    }
    await delay(HANDLER_MS);
  };
  const worker = await sys.startWorker(CONCURRENCY, flow, handler);
  let failures = 0;
  try {
    await sleep(WARMUP_MS);
    const t0 = performance.now();
    const a0 = aStarted;
    const gap = 1000 / SMALL_RATE;
    if (small) {
      for (let j = 0; j < sizes.flowSmallJobs; j++) {
        for (let k = 0; k < SMALL_TENANTS; k++) {
          const due = t0 + j * gap + (k * gap) / SMALL_TENANTS;
          const wait = due - performance.now();
          if (wait > 1) await sleep(wait);
          const idx = j * SMALL_TENANTS + k;
          sentAt[idx] = performance.now();
          sys.enqueueOne({ i: idx, t: k + 1 }, flow).catch(() => failures++);
        }
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([smallDone, new Promise((r) => (timer = setTimeout(r, sizes.flowGraceS * 1000)))]);
      clearTimeout(timer);
    } else {
      await sleep(sizes.flowSmallJobs * gap);
    }
    if (smallStarted < small || !small) {
      end = performance.now();
      aAtEnd = aStarted;
    }
    const waits: number[] = [];
    for (let idx = 0; idx < small; idx++) waits.push((Number.isNaN(startedAt[idx]!) ? end : startedAt[idx]!) - sentAt[idx]!);
    return {
      waits,
      censored: small - smallStarted,
      aRate: (aAtEnd - a0) / ((end - t0) / 1000),
      aRanOut: aAtEnd >= backlog,
      failures,
    };
  } finally {
    await worker.stop();
    await sys.reset();
  }
}

interface Entry {
  key: string;
  sys: FlowSystem;
  flow: boolean;
  small: boolean;
  /** The entry whose A-alone rate this one's A rate is divided by. */
  alone: string;
}

async function noisyNeighbour(ctx: Ctx, target: ForgeTarget): Promise<void> {
  const { backend } = target;
  const sizes = ctx.sizes;
  const systems: FlowSystem[] = [];
  const forge = new FlowForge(backend, target.url, target.schema, target.admin);
  const candidates: FlowSystem[] = backend === "postgres" ? [forge, new FlowGraphile(ctx.admin), new FlowPgBoss(ctx.admin)] : [forge];
  for (const sys of candidates) {
    try {
      await sys.prepare();
      systems.push(sys);
    } catch (error) {
      ctx.skip(`flow noisy neighbour (${backend}, ${sys.label})`, error instanceof Unavailable ? error.message : String(error));
    }
  }
  if (!systems.length) return;
  const tool: Record<string, string> = { forge: "groups", graphile: "queues", pgboss: "groups" };
  const toolLabel: Record<string, string> = { forge: "tenant as group", graphile: "job queue per tenant", pgboss: "group per tenant, groupConcurrency" };
  const entries: Entry[] = [];
  for (const sys of systems) {
    entries.push({ key: `${sys.id}:${tool[sys.id]}`, sys, flow: true, small: true, alone: `${sys.id}:alone` });
    if (sys.id === "forge") entries.push({ key: "forge:none", sys, flow: false, small: true, alone: "forge:alone" });
    entries.push({ key: `${sys.id}:alone`, sys, flow: false, small: false, alone: `${sys.id}:alone` });
  }
  const rows = new Map<string, Row>(
    entries.map((e) => {
      const what = e.small ? (e.flow ? toolLabel[e.sys.id] : "no tenant, no group") : "A alone";
      const config = e.small
        ? e.sys.describe(e.flow)
        : `A's ${sizes.flowBacklog} jobs only, no small tenants: ${e.sys.describe(false)}`.replace(": the same jobs with", ", with");
      return [e.key, { system: e.key, label: `${e.sys.label} (${what})`, config, samples: {} }];
    }),
  );
  const rounds = sizes.flowRounds;
  for (let r = 0; r < rounds; r++) {
    process.stdout.write(`  flow noisy ${backend} round ${r + 1}:`);
    const aRates = new Map<string, number>();
    const done: [Entry, NoisyResult][] = [];
    for (const e of rotate(entries, r)) {
      let res: NoisyResult;
      try {
        res = await noisyRun(e.sys, sizes, e.flow, e.small, ctx);
      } catch (error) {
        // One system failing leaves the others' rows standing.
        ctx.skip(`flow noisy neighbour (${backend}, ${e.key})`, `failed: ${(error as Error).stack}`);
        entries.splice(entries.indexOf(e), 1);
        rows.delete(e.key);
        continue;
      }
      const row = rows.get(e.key)!;
      aRates.set(e.key, res.aRate);
      addSample(row, "A jobs/s", res.aRate);
      if (e.small) {
        const w = sorted(res.waits);
        addSample(row, "wait p50", percentile(w, 50));
        addSample(row, "wait p99", percentile(w, 99));
        addSample(row, "max (ms)", w[w.length - 1]!);
        done.push([e, res]);
      }
      const notes: string[] = [];
      if (res.censored) notes.push(`${res.censored}/${res.waits.length} small jobs not started by the cut: wait = time to the cut, a lower bound`);
      if (res.aRanOut) notes.push("A's backlog ran out inside the window");
      if (res.failures) notes.push(`${res.failures} enqueues failed`);
      if (notes.length) row.note = notes.join("; ");
      process.stdout.write(
        `\n    ${e.key}: ${e.small ? `wait ${percentile(sorted(res.waits), 50).toFixed(1)}/${percentile(sorted(res.waits), 99).toFixed(1)} ms, ` : ""}A ${Math.round(res.aRate)}/s${notes.length ? ` [${notes.join("; ")}]` : ""}`,
      );
    }
    for (const [e] of done) {
      const alone = aRates.get(e.alone);
      if (alone && rows.has(e.key)) addSample(rows.get(e.key)!, "A ÷ alone", aRates.get(e.key)! / alone);
    }
    process.stdout.write("\n");
  }
  for (const sys of systems) await sys.close().catch(() => undefined);
  const n = SMALL_TENANTS * sizes.flowSmallJobs;
  ctx.publish({
    id: `flow-noisy-${backend}`,
    title: `${BACKEND_TITLE[backend]}: noisy neighbour — A's ${sizes.flowBacklog} jobs, then ${SMALL_TENANTS} tenants × ${sizes.flowSmallJobs} jobs at ${SMALL_RATE}/s each, ${HANDLER_MS} ms handlers, concurrency ${CONCURRENCY}`,
    unit: "ms",
    better: "lower",
    columns: ["wait p50", "wait p99"],
    costColumns: ["max (ms)", "A jobs/s", "A ÷ alone"],
    ref: "forge:groups",
    rows: [...rows.values()],
    notes: [
      `Wait = the small tenants' handler start − their enqueue call's start, in this process (${n} jobs a round; percentiles per round, median over rounds). A jobs/s = A's handler starts per second from the first small enqueue until the last small job started (cut ${sizes.flowGraceS} s after the last enqueue); "A alone" runs the same window with no small tenants, and A ÷ alone divides by the same system's alone rate of the same round. Handlers \`await setTimeout(${HANDLER_MS})\`: at most ${Math.round((CONCURRENCY * 1000) / HANDLER_MS)} jobs/s.`,
    ],
  });
}
