import type { Row } from "../lib/report.js";
import { rotate } from "../lib/stats.js";
import type { PgBossSystem } from "../systems/pgboss.js";
import type { RawPgSystem } from "../systems/pg-raw.js";
import type { QueueSystem } from "../systems/types.js";
import { addCosts, addSample, COST_COLUMNS, enqueueBulkRun, enqueueOneRun, latencyRun, processingRun, type Ctx } from "./common.js";

export interface PgSystems {
  forge: QueueSystem;
  graphile: QueueSystem;
  pgboss: PgBossSystem;
  pgbossNotify: PgBossSystem;
  raw: RawPgSystem;
}

function row(sys: QueueSystem, variant: string | null, label?: string): Row {
  return {
    system: variant && variant !== "default" ? `${sys.id}:${variant}` : sys.id,
    label: label ?? (variant && sys.variants.processing.length > 1 ? `${sys.label} (${variant})` : sys.label),
    config: sys.describe(variant ?? "default"),
    samples: {},
  };
}

const progress = (s: string) => process.stdout.write(s);

export async function enqueueOne(ctx: Ctx, s: PgSystems): Promise<void> {
  const n = ctx.sizes.enqueueOne;
  const list: QueueSystem[] = [s.forge, s.graphile, s.pgboss, s.raw];
  const rows = new Map(list.map((sys) => [sys, row(sys, null, sys === s.raw ? "raw INSERT" : undefined)]));
  rows.get(s.forge)!.config = "enqueue(task, payload, { db }) awaited one after another";
  rows.get(s.graphile)!.config = "workerUtils.addJob(task, payload) awaited one after another";
  rows.get(s.pgboss)!.config = "boss.send(queue, data) awaited one after another";
  rows.get(s.raw)!.config = "INSERT … VALUES ($1, $2) (prepared), awaited one after another";
  for (let r = 0; r < ctx.sizes.rounds; r++) {
    progress(`  enqueue-one round ${r + 1}:`);
    for (const sys of rotate(list, r)) {
      const { rate, costs } = await enqueueOneRun(sys, n, ctx.admin);
      addSample(rows.get(sys)!, "jobs/s", rate);
      addCosts(rows.get(sys)!, costs);
      progress(` ${sys.id} ${Math.round(rate)}`);
    }
    progress("\n");
  }
  ctx.publish({
    id: "enqueue-one",
    title: `Enqueue one by one (N=${n}, each awaited, one connection at a time)`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    costColumns: COST_COLUMNS,
    ref: s.forge.id,
    rows: [...rows.values()],
    notes: ["Each enqueue is its own transaction and commit (fsync on)."],
  });
}

export async function enqueueBulk(ctx: Ctx, s: PgSystems): Promise<void> {
  const n = ctx.sizes.enqueueBulk;
  const list: QueueSystem[] = [s.forge, s.graphile, s.pgboss, s.raw];
  const rows = new Map(list.map((sys) => [sys, row(sys, null, sys === s.raw ? "raw INSERT … SELECT unnest" : undefined)]));
  rows.get(s.forge)!.config = `enqueueMany([{ task, payload } × ${n}], { db })`;
  rows.get(s.graphile)!.config = `workerUtils.addJobs([{ identifier, payload } × ${n}])`;
  rows.get(s.pgboss)!.config = `boss.insert(queue, [{ data } × ${n}])`;
  rows.get(s.raw)!.config = "INSERT INTO jobs (task, payload) SELECT 'noop', p FROM unnest($1::jsonb[])";
  for (let r = 0; r < ctx.sizes.rounds; r++) {
    progress(`  enqueue-bulk round ${r + 1}:`);
    for (const sys of rotate(list, r)) {
      // Three calls per round: one bulk call is short, so one sample alone is noisy.
      for (let k = 0; k < 3; k++) {
        const { rate, costs } = await enqueueBulkRun(sys, n, ctx.admin);
        addSample(rows.get(sys)!, "jobs/s", rate);
        addCosts(rows.get(sys)!, costs);
        progress(` ${sys.id} ${Math.round(rate)}`);
      }
    }
    progress("\n");
  }
  ctx.publish({
    id: "enqueue-bulk",
    title: `Bulk enqueue (N=${n} in one call)`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    costColumns: COST_COLUMNS,
    ref: s.forge.id,
    rows: [...rows.values()],
    notes: [],
  });
}

export async function processing(ctx: Ctx, s: PgSystems): Promise<void> {
  const n = ctx.sizes.processing;
  const entries: [QueueSystem, string][] = [];
  for (const sys of [s.forge, s.graphile, s.pgboss, s.raw] as QueueSystem[]) for (const v of sys.variants.processing) entries.push([sys, v]);
  // BENCH_SYSTEMS=forge,raw:batch100 narrows the list while working on the harness.
  const filter = process.env.BENCH_SYSTEMS?.split(",");
  if (filter) entries.splice(0, entries.length, ...entries.filter(([sys, v]) => filter.includes(sys.id) || filter.includes(`${sys.id}:${v}`)));
  for (const c of ctx.sizes.concurrencies) {
    const rows = new Map(entries.map((e) => [e, row(e[0], e[1], e[0] === s.raw ? "raw SQL, batches of 100" : undefined)]));
    for (let r = 0; r < ctx.sizes.rounds; r++) {
      progress(`  processing c=${c} round ${r + 1}:`);
      for (const e of rotate(entries, r)) {
        const [sys, variant] = e;
        const result = await processingRun(sys, variant, c, n, ctx.sizes.runTimeoutS, ctx.admin);
        const rw = rows.get(e)!;
        addSample(rw, "jobs/s", result.rateFromStart);
        addSample(rw, "from 1st job", result.rate);
        addCosts(rw, result.costs);
        if (result.timedOut) rw.note = `rate over a ${ctx.sizes.runTimeoutS} s window: ${result.processed}/${n} done`;
        progress(` ${rw.system} ${Math.round(result.rateFromStart)}`);
      }
      progress("\n");
    }
    ctx.publish({
      id: `processing-c${c}`,
      title: `Processing ${n} no-op jobs at concurrency ${c}`,
      unit: "jobs/s",
      better: "higher",
      columns: ["jobs/s"],
      costColumns: ["from 1st job", ...COST_COLUMNS],
      ref: s.forge.id,
      rows: [...rows.values()],
      notes: [
        "jobs/s: from the call that starts the worker (its start-up included) until the database holds no unfinished job (every completion written, polled every 5 ms), as a user would time it; from 1st job: the same run timed from the first handler call. Jobs enqueued in bulk before the worker starts; the worker in the harness's process.",
        "Costs per job over the run: statements sent (client side), CPU of this Node process, CPU of all PostgreSQL processes (other clients of the server count too: approximate), WAL bytes written (server-wide, same caveat).",
      ],
    });
  }
}

export async function latency(ctx: Ctx, s: PgSystems): Promise<void> {
  const n = ctx.sizes.latencySamples;
  const rate = ctx.sizes.latencyRate;
  const list: QueueSystem[] = [s.forge, s.graphile, s.pgbossNotify, s.raw];
  const rows = new Map(list.map((sys) => [sys, row(sys, sys.variants.latency, sys === s.raw ? "raw LISTEN/NOTIFY" : sys.label)]));
  for (const [sys, rw] of rows) {
    rw.system = sys.id;
    rw.config = sys.describe(sys.variants.latency) + "; worker concurrency 10";
  }
  for (let r = 0; r < ctx.sizes.rounds; r++) {
    progress(`  latency round ${r + 1}:`);
    for (const sys of rotate(list, r)) {
      const enqueue = sys === s.raw ? (p: { i: number }) => s.raw.enqueueNotify(p) : undefined;
      const res = await latencyRun(sys, n, rate, enqueue);
      const rw = rows.get(sys)!;
      addSample(rw, "p50", res.p50);
      addSample(rw, "p95", res.p95);
      addSample(rw, "p99", res.p99);
      if (res.received < n) rw.note = `only ${res.received}/${n} arrived within 10 s`;
      progress(` ${sys.id} ${res.p50.toFixed(1)}/${res.p99.toFixed(1)}`);
    }
    progress("\n");
  }
  ctx.publish({
    id: "latency",
    title: `Latency enqueue → handler start at ${rate} jobs/s (${n} samples per round)`,
    unit: "ms",
    better: "lower",
    columns: ["p50", "p95", "p99"],
    ref: s.forge.id,
    rows: [...rows.values()],
    notes: [
      "Clock starts before the enqueue call (its commit included) and stops when the handler is called, in the same process. Percentiles per round; the table shows their median over rounds.",
    ],
  });
}
