import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { loadForge } from "../forge.js";
import { PG_URL } from "../lib/env.js";
import { historyOf, insertEndedPg, liveIdsAbove, rebuildFinishedCounts } from "../lib/fixtures.js";
import { adminClient, waitQuiet } from "../lib/metrics.js";
import { median, percentile, sleep, sorted } from "../lib/stats.js";
import type { Ctx } from "./common.js";

/**
 * Issue 17.4, PostgreSQL's history table: retention by partitions against retention by rows.
 * ROWS done jobs that finished over DAYS days, 30 and more days ago, kept in history (where every
 * ended job lives since migration 14; database bench_history). Each round, while four lanes
 * claim and complete one job at a time:
 * - prune (delete) of all ROWS in batches of 1,000;
 * - the rows put back, then pruneHistory dropping their days.
 * (Moving legacy rows out of the live table is the online upgrade's: BENCHMARKS.md, "Online upgrade".)
 * Reported: seconds and rows/s of each, and the lanes' claim + completion latency during each
 * against the same lanes with nothing else running.
 */
const ROWS = Number(process.env.BENCH_HISTORY_ROWS ?? 1_000_000);
const DAYS = 10;
const DATABASE = "bench_history";
const DB_URL = PG_URL.replace(/\/[^/?]*(\?|$)/, `/${DATABASE}$1`);
const SCHEMA = "forge_history";
const LANES = 4;
const BASELINE_SECONDS = 10;
const RESULTS = fileURLToPath(new URL("../../results/", import.meta.url));

type Forge = Awaited<ReturnType<typeof loadForge>>;
type Db = ReturnType<Forge["connect"]>;

/** ROWS done rows in history, DAYS days of them (one partition each), written with triggers off and counted by one aggregate. */
async function writeRows(admin: pg.Client): Promise<void> {
  const perDay = Math.ceil(ROWS / DAYS);
  for (let d = 0; d < DAYS; d++) await insertEndedPg(admin, SCHEMA, 1 + d * perDay, Math.min(perDay, ROWS - d * perDay), 30 + d);
  await rebuildFinishedCounts(admin, SCHEMA, historyOf(SCHEMA));
  await admin.query(`VACUUM ANALYZE ${historyOf(SCHEMA)}`);
  await admin.query("CHECKPOINT");
}

function summary(values: number[]): { p50: number; p99: number; n: number } {
  const s = sorted(values);
  return { p50: percentile(s, 50), p99: percentile(s, 99), n: s.length };
}

/** LANES loops of enqueue + processOne, timing processOne (a claim and a completion), until `until` settles. */
async function lanes(forge: Forge, db: Db, until: Promise<unknown>): Promise<number[]> {
  let stop = false;
  void until.finally(() => (stop = true)).catch(() => undefined);
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

interface Step {
  seconds: number[];
  rows: number[];
  p50: number[];
  p99: number[];
}

const step = (): Step => ({ seconds: [], rows: [], p50: [], p99: [] });

/** Runs `work` with the lanes alongside; records its seconds, its rows and the lanes' latency. */
async function during(forge: Forge, probe: Db, into: Step, work: () => Promise<number>): Promise<void> {
  const t0 = performance.now();
  const working = work();
  const ms = summary(await lanes(forge, probe, working));
  into.rows.push(await working);
  into.seconds.push((performance.now() - t0) / 1000);
  into.p50.push(ms.p50);
  into.p99.push(ms.p99);
}

export async function run(ctx: Ctx): Promise<void> {
  if ((await ctx.admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [DATABASE])).rowCount === 0) {
    await ctx.admin.query(`CREATE DATABASE ${DATABASE}`);
  }
  const admin = await adminClient(DB_URL);
  const forge = await loadForge();
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  const db = forge.connect(DB_URL, { schema: SCHEMA });
  await forge.migrate({ db });
  const probe = forge.connect(DB_URL, { schema: SCHEMA });
  await liveIdsAbove(admin, SCHEMA);
  const rounds = Math.max(1, Math.min(ctx.sizes.rounds, 3));
  const base = step();
  const deleted = step();
  const dropped = step();
  for (let r = 0; r < rounds; r++) {
    await writeRows(admin);
    await waitQuiet(ctx.sizes.quietWaitMs);
    const b = summary(await lanes(forge, probe, sleep(BASELINE_SECONDS * 1000)));
    base.p50.push(b.p50);
    base.p99.push(b.p99);
    await during(forge, probe, deleted, () => forge.prune({ db, olderThan: 7 * 86400, batchSize: 1000 }));

    await writeRows(admin);
    await waitQuiet(ctx.sizes.quietWaitMs);
    const days = (await forge.historyPartitions({ db })).length;
    await during(forge, probe, dropped, async () => (await forge.pruneHistory({ db, olderThan: 7 * 86400 })).length);
    console.log(
      `  round ${r + 1}: delete ${deleted.seconds.at(-1)!.toFixed(1)} s, ` +
        `drop ${dropped.rows.at(-1)} of ${days} days ${(dropped.seconds.at(-1)! * 1000).toFixed(0)} ms; lanes p99 ${b.p99.toFixed(1)} ms alone, ` +
        `${deleted.p99.at(-1)!.toFixed(1)} / ${dropped.p99.at(-1)!.toFixed(1)} ms during`,
    );
  }
  await db.close();
  await probe.close();
  await admin.end();

  const m = (values: number[]) => median(values);
  const raw = {
    date: new Date().toISOString(),
    commit: execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim(),
    rows: ROWS,
    days: DAYS,
    rounds,
    lanesAlone: base,
    deleteRows: deleted,
    dropDays: dropped,
    medians: {
      deleteRowsPerSecond: ROWS / m(deleted.seconds),
      dropSeconds: m(dropped.seconds),
      lanesP99: { alone: m(base.p99), delete: m(deleted.p99), drop: m(dropped.p99) },
    },
  };
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(`${RESULTS}history.json`, `${JSON.stringify(raw, null, 2)}\n`);
  console.log(`  medians: ${JSON.stringify(raw.medians)}`);
}
