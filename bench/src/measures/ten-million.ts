import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { loadDashboard, loadForge } from "../forge.js";
import { PG_URL } from "../lib/env.js";
import { highestFixtureId, historyOf, historySize, insertEndedPg, legacyEndedRows, liveIdsAbove, rebuildFinishedCounts } from "../lib/fixtures.js";
import { adminClient, machineBusy, waitQuiet } from "../lib/metrics.js";
import type { Row } from "../lib/report.js";
import { median, percentile, rotate, sleep, sorted } from "../lib/stats.js";
import { ForgeSystem, type ForgeAdmin } from "../systems/forge.js";
import { addSample, processingRun, type Ctx } from "./common.js";
import { otherBackends } from "./ten-million-backends.js";

/**
 * Issue 17.4: ten million finished jobs kept (in history, where every ended job lives since
 * migration 14), in a database of its own (bench_10m), against an empty queue in the same database:
 * - claim rate (runWorker, concurrency 10) on each;
 * - latency of what an operator reads, on each: statusCounts (what `forge-jobs status`, the
 *   dashboard and the queue-depth gauges count with), all of `forge-jobs status`'s reads, and the
 *   dashboard's home page (every read it makes, rendered, over HTTP); the old whole-table count
 *   once for reference;
 * - prune of 1,000,000 of those rows while four lanes claim and complete one job at a time:
 *   their latency during the prune against the same lanes without it.
 * The fixture is written once (INSERT … SELECT generate_series, triggers off, counts rebuilt
 * by one aggregate) and kept across runs; each prune round first puts back the rows it deletes.
 */
const ROWS = Number(process.env.BENCH_10M_ROWS ?? 10_000_000);
const PRUNED = Number(process.env.BENCH_10M_PRUNE ?? 1_000_000);
const DATABASE = "bench_10m";
const DB_URL = PG_URL.replace(/\/[^/?]*(\?|$)/, `/${DATABASE}$1`);
const EMPTY = "forge_empty";
const FULL = "forge_10m";
const STATUS_CALLS = 300;
/** Calls of the dashboard page and of the status command's reads, per round and table. */
const PAGE_CALLS = 100;
const LANES = 4;
const BASELINE_SECONDS = 15;
const RESULTS = fileURLToPath(new URL("../../results/", import.meta.url));

/** The old statusCounts statement (before migration 7): every row of the table, grouped. */
const WHOLE_TABLE_COUNT = (table: string) => `
  SELECT queue, status, count(*) AS n,
         count(*) FILTER (WHERE status = 'pending' AND run_at <= now()) AS ready
  FROM ${table} GROUP BY queue, status`;

/** Pending and running through the partial indexes: the harness's own polling must not scan ten million rows. */
function admin10(admin: pg.Client, keep: boolean): ForgeAdmin {
  return {
    reset: async (table) => {
      if (keep) {
        await admin.query(`DELETE FROM ${table} WHERE status = 'pending' AND group_key = '' AND concurrency_key = ''`);
        await admin.query(`DELETE FROM ${table} WHERE status = 'running'`);
        await admin.query(`VACUUM ${table}`);
      } else await admin.query(`TRUNCATE ${table} RESTART IDENTITY`);
      await admin.query("CHECKPOINT");
    },
    unfinished: async (table) => {
      const { rows } = await admin.query<{ n: string }>(
        `SELECT (SELECT count(*) FROM ${table} WHERE status = 'pending' AND group_key = '' AND concurrency_key = '')
              + (SELECT count(*) FROM ${table} WHERE status = 'running') AS n`,
      );
      return Number(rows[0]!.n);
    },
  };
}

async function finishedRows(admin: pg.Client, schema: string): Promise<number> {
  const { rows } = await admin.query<{ n: string | null }>(`SELECT sum(n) AS n FROM ${schema}.jobs_counts`);
  return Number(rows[0]!.n ?? 0);
}

/** Done rows finished a day ago, or (`old`) thirty days ago: what prune --older-than 7d takes. The caller adds them to the counts. */
async function insertDone(admin: pg.Client, from: number, count: number, old: boolean): Promise<void> {
  await insertEndedPg(admin, FULL, from, count, old ? 30 : 1);
}

async function buildFixture(admin: pg.Client, table: string): Promise<void> {
  const t0 = performance.now();
  await admin.query(`TRUNCATE ${table}, ${historyOf(FULL)}`);
  process.stdout.write(`  writing ${ROWS.toLocaleString("en-US")} done rows into history `);
  // The oldest PRUNED rows finished thirty days ago, the rest a day ago.
  await insertDone(admin, 1, PRUNED, true);
  await insertDone(admin, PRUNED + 1, ROWS - PRUNED, false);
  await rebuildFinishedCounts(admin, FULL, historyOf(FULL));
  await liveIdsAbove(admin, FULL);
  await admin.query(`VACUUM ANALYZE ${historyOf(FULL)}`);
  console.log(` ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

function summary(values: number[]): { p50: number; p99: number; n: number } {
  const s = sorted(values);
  return { p50: percentile(s, 50), p99: percentile(s, 99), n: s.length };
}

type Forge = Awaited<ReturnType<typeof loadForge>>;

/** `calls` timed calls of `read`, after 5 untimed ones. */
async function latency(read: () => Promise<unknown>, calls: number): Promise<number[]> {
  for (let i = 0; i < 5; i++) await read();
  const ms: number[] = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await read();
    ms.push(performance.now() - t0);
  }
  return ms;
}

/** The operator reads timed on each table, with the calls a round makes of each. */
const READS = [
  { id: "statusCounts", label: "statusCounts()", calls: STATUS_CALLS },
  { id: "status", label: "forge-jobs status: its reads (statusCounts, listLimits, listGroups)", calls: PAGE_CALLS },
  { id: "dashboard", label: "dashboard home page (GET / over HTTP: every read, rendered)", calls: PAGE_CALLS },
] as const;
type ReadId = (typeof READS)[number]["id"];

/**
 * One function per operator read on `db`: what cli/commands.ts `status` reads (statusCounts,
 * then flowOverview: listLimits and listGroups) and the dashboard's home page, served by
 * createDashboard in this process and fetched as a browser would.
 */
async function operatorReads(
  forge: Forge,
  db: ReturnType<Forge["connect"]>,
): Promise<{ reads: Record<ReadId, () => Promise<unknown>>; close: () => Promise<void> }> {
  const { createDashboard } = await loadDashboard();
  const handler = createDashboard({ db, basePath: "/", refreshSeconds: 0 });
  const server = createServer((req, res) =>
    handler(req, res, (error) => {
      res.statusCode = 500;
      res.end(String(error));
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;
  return {
    reads: {
      statusCounts: () => forge.statusCounts({ db }),
      status: async () => {
        await forge.statusCounts({ db });
        await forge.listLimits({ db });
        await forge.listGroups({ db });
      },
      dashboard: async () => {
        const res = await fetch(url);
        const body = await res.text();
        if (res.status !== 200) throw new Error(`dashboard page: HTTP ${res.status}: ${body.slice(0, 300)}`);
      },
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** LANES loops of enqueue + processOne, timing processOne (a claim and a completion), until `until` resolves. */
async function lanes(forge: Forge, db: ReturnType<Forge["connect"]>, until: Promise<unknown>): Promise<number[]> {
  let stop = false;
  void until.finally(() => (stop = true));
  const ms: number[] = [];
  await Promise.all(
    Array.from({ length: LANES }, async () => {
      while (!stop) {
        await forge.enqueue("noop", null, { db, queue: "probe" });
        const t0 = performance.now();
        await forge.processOne({ noop: () => null }, { db, queue: "probe" });
        ms.push(performance.now() - t0);
      }
    }),
  );
  return ms;
}

/** BENCH_10M_BACKENDS (default all three) picks the parts; each writes its own file in bench/results/. */
export async function run(ctx: Ctx): Promise<void> {
  const wanted = (process.env.BENCH_10M_BACKENDS ?? "postgres,sqlite,mariadb").split(",");
  if (wanted.includes("postgres")) await postgres(ctx);
  if (wanted.includes("sqlite") || wanted.includes("mariadb")) {
    const others = await otherBackends(ctx.sizes.quietWaitMs);
    mkdirSync(RESULTS, { recursive: true });
    writeFileSync(`${RESULTS}ten-million-backends.json`, `${JSON.stringify({ date: new Date().toISOString(), commit: commit(), ...others }, null, 2)}\n`);
  }
}

function commit(): string {
  return execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
}

async function postgres(ctx: Ctx): Promise<void> {
  const rounds = ctx.sizes.rounds;
  const jobs = ctx.sizes.bloatJobs;
  if ((await ctx.admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [DATABASE])).rowCount === 0) {
    await ctx.admin.query(`CREATE DATABASE ${DATABASE}`);
  }
  const admin = await adminClient(DB_URL);
  const forge = await loadForge();
  const empty = new ForgeSystem("forge", "@forge/jobs, empty table", "postgres", DB_URL, EMPTY, admin10(admin, false));
  const full = new ForgeSystem("forge-10m", `@forge/jobs, ${ROWS.toLocaleString("en-US")} done rows`, "postgres", DB_URL, FULL, admin10(admin, true));
  await empty.prepare();
  await full.prepare();
  const table = full.table;
  const have = await finishedRows(admin, FULL);
  // A fixture of before migration 14 (done rows in the live table) is written again, in history.
  if (have < ROWS || (await legacyEndedRows(admin, FULL))) await buildFixture(admin, table);
  else console.log(`  reusing ${have.toLocaleString("en-US")} finished rows in ${historyOf(FULL)}`);
  const size = await historySize(admin, FULL);
  const raw: Record<string, unknown> = { rows: ROWS, pruned: PRUNED, rounds, jobs, tableSize: size, busyBefore: await machineBusy() };

  // 1. Claim rate.
  const rate = new Map<ForgeSystem, Row>(
    [empty, full].map((s) => [s, { system: s.id, label: s.label, config: "runWorker({ concurrency: 10 })", samples: {} }]),
  );
  for (let r = 0; r < rounds; r++) {
    process.stdout.write(`  claim rate round ${r + 1}:`);
    for (const s of rotate([empty, full], r)) {
      const res = await processingRun(s, "default", 10, jobs, ctx.sizes.runTimeoutS * 2, null);
      addSample(rate.get(s)!, "jobs/s", res.rate);
      process.stdout.write(` ${s.id} ${Math.round(res.rate)}${res.timedOut ? " (timed out)" : ""}`);
    }
    process.stdout.write("\n");
  }

  // 2. Latency of the operator reads, a backlog of 1,000 pending jobs in each table.
  const dbs = { empty: forge.connect(DB_URL, { schema: EMPTY }), full: forge.connect(DB_URL, { schema: FULL }) };
  type Latencies = Record<"empty" | "full", { p50: number[]; p99: number[] }>;
  const latencies = (): Latencies => ({ empty: { p50: [], p99: [] }, full: { p50: [], p99: [] } });
  const reads: Record<ReadId, Latencies> = { statusCounts: latencies(), status: latencies(), dashboard: latencies() };
  for (const s of [empty, full]) await s.reset();
  for (const db of Object.values(dbs))
    await forge.enqueueMany(
      Array.from({ length: 1000 }, (_, i) => ({ task: "noop", payload: { i } })),
      { db },
    );
  const readers = { empty: await operatorReads(forge, dbs.empty), full: await operatorReads(forge, dbs.full) };
  for (let r = 0; r < rounds; r++) {
    for (const read of READS) {
      for (const key of rotate(["empty", "full"] as const, r)) {
        await waitQuiet(ctx.sizes.quietWaitMs);
        const m = summary(await latency(readers[key].reads[read.id], read.calls));
        reads[read.id][key].p50.push(m.p50);
        reads[read.id][key].p99.push(m.p99);
      }
      const at = reads[read.id];
      console.log(
        `  ${read.id} round ${r + 1}: p50/p99 empty ${at.empty.p50.at(-1)!.toFixed(2)}/${at.empty.p99.at(-1)!.toFixed(2)} ms, 10M ${at.full.p50.at(-1)!.toFixed(2)}/${at.full.p99.at(-1)!.toFixed(2)} ms`,
      );
    }
  }
  for (const reader of Object.values(readers)) await reader.close();
  const whole: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    await admin.query(WHOLE_TABLE_COUNT(historyOf(FULL)));
    whole.push(performance.now() - t0);
  }
  console.log(`  the old whole-table count: ${whole.map((v) => v.toFixed(0)).join(", ")} ms`);
  raw.status = reads.statusCounts;
  raw.reads = reads;
  raw.wholeTableCountMs = whole;

  // 3. Prune of PRUNED rows while lanes claim and complete.
  const pruneRounds = Math.max(1, Math.min(rounds, 2));
  const prune: {
    seconds: number[];
    deleted: number[];
    baseP50: number[];
    baseP99: number[];
    duringP50: number[];
    duringP99: number[];
    baseRate: number[];
    duringRate: number[];
  } = {
    seconds: [],
    deleted: [],
    baseP50: [],
    baseP99: [],
    duringP50: [],
    duringP99: [],
    baseRate: [],
    duringRate: [],
  };
  const probe = forge.connect(DB_URL, { schema: FULL });
  for (let r = 0; r < pruneRounds; r++) {
    const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${historyOf(FULL)} WHERE finished_at < now() - interval '7 days'`);
    const old = Number(rows[0]!.n);
    if (old < PRUNED) {
      process.stdout.write(`  putting back ${(PRUNED - old).toLocaleString("en-US")} old rows `);
      await insertDone(admin, (await highestFixtureId(admin, FULL)) + 1, PRUNED - old, true);
      await admin.query(
        `INSERT INTO ${FULL}.jobs_counts AS c (queue, tenant, status, shard, n) VALUES ('default', '', 'done', 0, $1)
         ON CONFLICT (queue, tenant, status, shard) DO UPDATE SET n = c.n + excluded.n`,
        [PRUNED - old],
      );
      await admin.query(`VACUUM ANALYZE ${historyOf(FULL)}`);
      process.stdout.write("\n");
    }
    await admin.query("CHECKPOINT");
    await waitQuiet(ctx.sizes.quietWaitMs);
    const base = await lanes(forge, probe, sleep(BASELINE_SECONDS * 1000));
    const b = summary(base);
    const t0 = performance.now();
    const pruning = forge.prune({ db: dbs.full, olderThan: 7 * 86400, batchSize: 1000 });
    const during = await lanes(forge, probe, pruning);
    const deleted = await pruning;
    const seconds = (performance.now() - t0) / 1000;
    const d = summary(during);
    prune.seconds.push(seconds);
    prune.deleted.push(deleted);
    prune.baseP50.push(b.p50);
    prune.baseP99.push(b.p99);
    prune.duringP50.push(d.p50);
    prune.duringP99.push(d.p99);
    prune.baseRate.push(b.n / BASELINE_SECONDS);
    prune.duringRate.push(d.n / seconds);
    console.log(
      `  prune round ${r + 1}: ${deleted} rows in ${seconds.toFixed(1)} s; claim+complete p50/p99 ${b.p50.toFixed(2)}/${b.p99.toFixed(2)} ms without, ${d.p50.toFixed(2)}/${d.p99.toFixed(2)} ms during`,
    );
  }
  raw.prune = prune;
  raw.counts = { full: await forge.statusCounts({ db: dbs.full, queue: "default" }) };
  for (const db of [...Object.values(dbs), probe]) await db.close();
  await empty.close();
  await full.close();
  await admin.end();

  const claim = [...rate.values()];
  raw.claimRate = Object.fromEntries(claim.map((row) => [row.system, row.samples["jobs/s"]]));
  const ratio = median(claim[1]!.samples["jobs/s"]!) / median(claim[0]!.samples["jobs/s"]!);
  raw.claimRatio = ratio;
  raw.date = new Date().toISOString();
  raw.commit = commit();
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(`${RESULTS}ten-million.json`, `${JSON.stringify(raw, null, 2)}\n`);
  ctx.publish({
    id: "ten-million",
    title: `Claim rate with ${ROWS.toLocaleString("en-US")} finished jobs kept vs none (${jobs} jobs, concurrency 10)`,
    unit: "jobs/s",
    better: "higher",
    columns: ["jobs/s"],
    ref: "forge",
    rows: claim,
    notes: [`History with the done rows (every partition, heap and indexes): ${size}. Raw figures of the whole measure: bench/results/ten-million.json.`],
  });
  ctx.publish({
    id: "ten-million-reads",
    title: `Operator reads with ${ROWS.toLocaleString("en-US")} finished jobs kept vs none (1,000 pending jobs in each; ms per call)`,
    unit: "ms",
    better: "lower",
    columns: ["p99", "p50", "empty p99", "empty p50"],
    // The rows are different reads, not systems: none is the reference (÷ ours stays "–").
    ref: "",
    rows: READS.map((read) => ({
      system: read.id,
      label: read.label,
      config: `${read.calls} calls a round, one after another, after 5 untimed`,
      samples: { p99: reads[read.id].full.p99, p50: reads[read.id].full.p50, "empty p99": reads[read.id].empty.p99, "empty p50": reads[read.id].empty.p50 },
    })),
    notes: [
      "Target (issue 17.4): `status` and the dashboard p99 ≤ 50 ms with 10,000,000 finished rows. The fixture's finished rows are all `done` and a day old (the failed list finds none), but history also keeps the jobs its claim-rate rounds have just processed (rounds × jobs, ended within the hour), and the dashboard's chart reads the last hour's ended jobs: its figure there counts that hour's activity too, the empty table's (truncated) none.",
    ],
  });
}
