/**
 * What one job writes on PostgreSQL: N no-op jobs enqueued in bulk, then one worker of
 * @forge/jobs (the built package) until all are done, in a database of its own created for the
 * round (CREATE DATABASE probe_storage_<round>, dropped after), so nothing else writes there.
 * Per job and per table of that database: row versions written (inserted + updated + deleted,
 * pg_stat_user_tables, read once every backend of the round has exited and flushed its
 * counters), the HOT share of updates, and WAL bytes, server-wide (pg_current_wal_lsn) and, where
 * pg_waldump can read the server's pg_wal, only the records of this database and of its
 * transactions. Rounds → medians.
 *
 * `tsx src/probe-storage.ts [jobs=20000] [concurrency=10] [rounds=3] [prefetch]` (prefetch: a number, or "auto", the default).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import pg from "pg";
import { loadForge } from "./forge.js";
import { PG_URL } from "./lib/env.js";
import { adminClient } from "./lib/metrics.js";
import { median, sleep } from "./lib/stats.js";

const args = process.argv.slice(2).filter((a) => a !== "--");
const positional = args.filter((a) => !a.startsWith("--"));
const prefetchFlag = args.find((a) => a.startsWith("--prefetch="))?.slice(11);
const jobs = Number(positional[0] ?? 20000);
const concurrency = Number(positional[1] ?? 10);
const rounds = Number(positional[2] ?? 3);
const prefetchText = prefetchFlag ?? positional[3];
const prefetch = prefetchText === undefined || prefetchText === "auto" ? undefined : Number(prefetchText);
const PG_WALDUMP = process.env.BENCH_PG_WALDUMP ?? "/usr/lib/postgresql/15/bin/pg_waldump";

interface TableCounts {
  ins: number;
  upd: number;
  del: number;
  hot: number;
}
type Stats = Map<string, TableCounts>;

/** Counters of every user table of the connected database, current to the last exited backend. */
async function tableStats(client: pg.Client): Promise<Stats> {
  await client.query("SELECT pg_stat_force_next_flush()");
  await client.query("SELECT pg_stat_clear_snapshot()");
  const { rows } = await client.query<{ name: string; ins: string; upd: string; del: string; hot: string }>(
    `SELECT schemaname || '.' || relname AS name, n_tup_ins::text AS ins, n_tup_upd::text AS upd, n_tup_del::text AS del, n_tup_hot_upd::text AS hot
     FROM pg_stat_user_tables`,
  );
  return new Map(rows.map((r) => [r.name, { ins: Number(r.ins), upd: Number(r.upd), del: Number(r.del), hot: Number(r.hot) }]));
}

function diff(a: Stats, b: Stats): Stats {
  const out: Stats = new Map();
  for (const [name, after] of b) {
    const before = a.get(name) ?? { ins: 0, upd: 0, del: 0, hot: 0 };
    const d = { ins: after.ins - before.ins, upd: after.upd - before.upd, del: after.del - before.del, hot: after.hot - before.hot };
    if (d.ins || d.upd || d.del) out.set(name, d);
  }
  return out;
}

/** Waits until no backend but `client`'s is connected to its database: they flush their counters on exit. */
async function othersGone(client: pg.Client): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const { rows } = await client.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    );
    if (rows[0]!.n === "0") break;
    await sleep(25);
  }
  await sleep(200);
}

const lsn = async (client: pg.Client) => (await client.query<{ l: string }>("SELECT pg_current_wal_lsn()::text AS l")).rows[0]!.l;
const walDiff = async (client: pg.Client, from: string, to: string) =>
  Number((await client.query<{ b: string }>("SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS b", [to, from])).rows[0]!.b);

/**
 * Bytes of the WAL records between two positions that touch a block of database `oid`, plus
 * every record of a transaction that did (its commit); null when pg_waldump or pg_wal is not
 * readable from here.
 */
async function walOfDatabase(walDir: string | null, oid: number, from: string, to: string): Promise<number | null> {
  if (!walDir || !existsSync(PG_WALDUMP) || !existsSync(walDir)) return null;
  const child = spawn(PG_WALDUMP, ["-p", walDir, "-s", from, "-e", to], { stdio: ["ignore", "pipe", "ignore"] });
  const ours = new Set<string>();
  const byTx = new Map<string, number>();
  let bytes = 0;
  let lines = 0;
  const touches = new RegExp(`rel \\d+/${oid}/`);
  for await (const line of createInterface({ input: child.stdout })) {
    const m = /len \(rec\/tot\):\s*\d+\/\s*(\d+), tx:\s*(\d+)/.exec(line);
    if (!m) continue;
    lines++;
    const tot = Number(m[1]);
    const tx = m[2]!;
    if (touches.test(line)) {
      bytes += tot;
      if (tx !== "0") ours.add(tx);
    } else if (tx !== "0") byTx.set(tx, (byTx.get(tx) ?? 0) + tot);
  }
  await new Promise((r) => child.on("close", r));
  if (lines === 0) return null;
  for (const tx of ours) bytes += byTx.get(tx) ?? 0;
  return bytes;
}

interface Round {
  tables: Stats;
  processingTables: Stats;
  walEnqueue: number;
  walProcessing: number;
  walDbEnqueue: number | null;
  walDbProcessing: number | null;
  seconds: number;
}

async function round(r: number, forge: Awaited<ReturnType<typeof loadForge>>): Promise<Round> {
  const name = `probe_storage_${r}`;
  const admin = await adminClient();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  const oid = Number((await admin.query<{ oid: string }>("SELECT oid::text FROM pg_database WHERE datname = $1", [name])).rows[0]!.oid);
  const walDir = await admin
    .query<{ d: string }>("SELECT current_setting('data_directory') AS d")
    .then((res) => `${res.rows[0]!.d}/pg_wal`)
    .catch(() => null);
  const stats = await adminClient(url.href);
  try {
    const setup = forge.connect(url.href);
    await forge.migrate({ db: setup });
    await setup.close();
    await othersGone(stats);
    await admin.query("CHECKPOINT");
    const s0 = await tableStats(stats);
    const w0 = await lsn(stats);
    const enq = forge.connect(url.href);
    for (let i = 0; i < jobs; i += 5000) {
      await forge.enqueueMany(
        Array.from({ length: Math.min(5000, jobs - i) }, (_, k) => ({ task: "noop", payload: { i: i + k } })),
        { db: enq },
      );
    }
    await enq.close();
    await othersGone(stats);
    const s1 = await tableStats(stats);
    const w1 = await lsn(stats);

    const db = forge.connect(url.href);
    const controller = new AbortController();
    let seen = 0;
    const t0 = performance.now();
    const running = forge.runWorker(
      { noop: () => void seen++ },
      { db, concurrency, signal: controller.signal, ...(prefetch === undefined ? {} : { prefetch }) },
    );
    for (;;) {
      if (seen >= jobs) {
        const [q] = await forge.statusCounts({ db, queue: "default" });
        const c = q?.counts;
        if (c && c.pending + c.running + c.waiting === 0 && c.done + c.failed + c.cancelled >= jobs) break;
      }
      await sleep(10);
    }
    const seconds = (performance.now() - t0) / 1000;
    controller.abort();
    await running;
    await db.close();
    await othersGone(stats);
    const s2 = await tableStats(stats);
    const w2 = await lsn(stats);
    return {
      tables: diff(s0, s2),
      processingTables: diff(s1, s2),
      walEnqueue: await walDiff(stats, w0, w1),
      walProcessing: await walDiff(stats, w1, w2),
      walDbEnqueue: await walOfDatabase(walDir, oid, w0, w1),
      walDbProcessing: await walOfDatabase(walDir, oid, w1, w2),
      seconds,
    };
  } finally {
    await stats.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

const forge = await loadForge();
const results: Round[] = [];
for (let r = 0; r < rounds; r++) {
  const res = await round(r, forge);
  results.push(res);
  const versions = [...res.tables.values()].reduce((a, t) => a + t.ins + t.upd + t.del, 0) / jobs;
  console.log(
    `round ${r + 1}: ${Math.round(jobs / res.seconds)} jobs/s, ${versions.toFixed(2)} row versions/job, WAL ${Math.round((res.walEnqueue + res.walProcessing) / jobs)} B/job server-wide${res.walDbEnqueue === null ? "" : `, ${Math.round((res.walDbEnqueue + res.walDbProcessing!) / jobs)} B/job this database's`}`,
  );
}

const per = (x: number) => x / jobs;
const med = (f: (r: Round) => number) => median(results.map(f));
const fmt = (x: number) => (x === 0 ? "0" : x.toFixed(x < 0.1 ? 3 : 2));
const names = [...new Set(results.flatMap((r) => [...r.tables.keys()]))].sort();
const zero = { ins: 0, upd: 0, del: 0, hot: 0 };
const out: string[] = [
  "",
  `@forge/jobs on PostgreSQL, ${jobs} no-op jobs enqueued in bulk (enqueueMany, 5,000 a call), then runWorker({ concurrency: ${concurrency}${prefetch === undefined ? "" : `, prefetch: ${prefetch}`} }) until all are done; medians of ${rounds} round(s), each in a fresh database`,
  "",
  "| table | inserted/job | updated/job | deleted/job | row versions/job | of which while processing | HOT share of updates |",
  "|---|---:|---:|---:|---:|---:|---:|",
];
for (const name of names) {
  const t = (r: Round) => r.tables.get(name) ?? zero;
  const p = (r: Round) => r.processingTables.get(name) ?? zero;
  const upd = med((r) => t(r).upd);
  out.push(
    `| ${name} | ${fmt(per(med((r) => t(r).ins)))} | ${fmt(per(upd))} | ${fmt(per(med((r) => t(r).del)))} | ${fmt(per(med((r) => t(r).ins + t(r).upd + t(r).del)))} | ${fmt(per(med((r) => p(r).ins + p(r).upd + p(r).del)))} | ${upd ? `${Math.round((100 * med((r) => t(r).hot)) / upd)}%` : "–"} |`,
  );
}
const all = (r: Round) => [...r.tables.values()].reduce((a, t) => a + t.ins + t.upd + t.del, 0);
const allUpd = (r: Round) => [...r.tables.values()].reduce((a, t) => a + t.upd, 0);
const allHot = (r: Round) => [...r.tables.values()].reduce((a, t) => a + t.hot, 0);
out.push(
  `| **all tables** | | | | **${fmt(per(med(all)))}** | | ${med(allUpd) ? `${Math.round((100 * med(allHot)) / med(allUpd))}%` : "–"} |`,
  "",
  `- WAL bytes per job, server-wide (pg_current_wal_lsn; other databases' writes count too): enqueue ${Math.round(per(med((r) => r.walEnqueue)))}, processing ${Math.round(per(med((r) => r.walProcessing)))}, total ${Math.round(per(med((r) => r.walEnqueue + r.walProcessing)))}`,
);
if (results.every((r) => r.walDbEnqueue !== null && r.walDbProcessing !== null)) {
  out.push(
    `- WAL bytes per job of this database's records and transactions (pg_waldump): enqueue ${Math.round(per(med((r) => r.walDbEnqueue!)))}, processing ${Math.round(per(med((r) => r.walDbProcessing!)))}, total ${Math.round(per(med((r) => r.walDbEnqueue! + r.walDbProcessing!)))}`,
  );
} else {
  out.push("- pg_waldump or pg_wal not readable from here: WAL only server-wide (BENCH_PG_WALDUMP names the binary)");
}
out.push(`- processing rate (worker start → every job counted done): ${Math.round(jobs / med((r) => r.seconds))} jobs/s`);
console.log(out.join("\n"));
