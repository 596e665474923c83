/**
 * Profiles @forge/jobs at concurrency 10 in a process of its own: N no-op jobs enqueued first,
 * then one worker with its defaults. Around the run only: a V8 CPU profile (inspector, 100 µs
 * sampling), event-loop utilisation, CPU time, and every statement with its round-trip time.
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { performance } from "node:perf_hooks";
import { loadForge } from "./forge.js";
import pg from "pg";
import { PG_URL, SCHEMA } from "./lib/env.js";
import { adminClient, counters, installStatementCounter, startStatementDetail, stopStatementDetail } from "./lib/metrics.js";
import { sleep } from "./lib/stats.js";

const [nText, concurrencyText, outDir] = process.argv.slice(2);
const n = Number(nText);
const concurrency = Number(concurrencyText);
installStatementCounter();
const forge = await loadForge();
const admin = await adminClient();
const db = forge.connect(PG_URL, { schema: SCHEMA.forge });
await forge.migrate({ db });
await admin.query(`TRUNCATE ${db.table} RESTART IDENTITY`);
for (let i = 0; i < n; i += 5000) {
  await forge.enqueueMany(
    Array.from({ length: Math.min(5000, n - i) }, (_, k) => ({ task: "noop", payload: { i: i + k } })),
    { db },
  );
}
await db.close();
await admin.query("CHECKPOINT");
const table = `${SCHEMA.forge}.jobs`;
const tableStats = async () =>
  (
    await admin.query<{ upd: string; hot: string }>(
      `SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot FROM pg_stat_user_tables WHERE relid = '${table}'::regclass`,
    )
  ).rows[0]!;
const dbStats = async () =>
  (
    await admin.query<{ commits: string; wal: string; deadlocks: string }>(
      `SELECT xact_commit::text AS commits, deadlocks::text AS deadlocks, pg_current_wal_lsn()::text AS wal FROM pg_stat_database WHERE datname = current_database()`,
    )
  ).rows[0]!;
const statsBefore = await tableStats();
const dbBefore = await dbStats();

const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.setSamplingInterval", { interval: 100 });

const workerDb = forge.connect(PG_URL, { schema: SCHEMA.forge });
let seen = 0;
let allSeen!: () => void;
const everyJob = new Promise<void>((r) => (allSeen = r));
const controller = new AbortController();
startStatementDetail();
const statementsBefore = counters.statements;
await session.post("Profiler.start");
const elu0 = performance.eventLoopUtilization();
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const workerErrors: string[] = [];
const running = forge.runWorker(
  { noop: () => void (++seen === n && allSeen()) },
  {
    db: workerDb,
    concurrency,
    signal: controller.signal,
    events: { "worker:error": (e) => void workerErrors.push(`${e.during}: ${(e.error as Error)?.message ?? String(e.error)}`) },
  },
);
await everyJob;
while (Number((await admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE status IN ('pending', 'running')`)).rows[0]!.n) > 0) await sleep(5);
const seconds = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const elu = performance.eventLoopUtilization(elu0);
const { profile } = await session.post("Profiler.stop");
const statements = counters.statements - statementsBefore;
controller.abort();
await running;
// One enqueue too, so its statement can be replayed below.
await forge.enqueue("noop", { i: -1 }, { db: workerDb });
const detail = stopStatementDetail();
await workerDb.close();

/**
 * Server-side cost of each statement the run sent: replayed once under EXPLAIN ANALYZE (rolled
 * back, with a backlog of N pending jobs in the table again), for planning vs execution time; and the enqueue statement 300× unnamed (parsed and
 * planned every time, as sent today) vs 300× as a named prepared statement, inside one
 * rolled-back transaction so no commit/fsync is in the timing.
 */
const replay = new pg.Client({ connectionString: PG_URL });
await replay.connect();
// A backlog again, so the claim replays against what the run's first claims met (no ANALYZE:
// statistics taken now would stay with the table).
await replay.query(`INSERT INTO ${table} (queue, task, payload) SELECT 'default', 'noop', jsonb_build_object('i', g) FROM generate_series(1, $1::int) g`, [n]);
const explained: { sql: string; planningMs: number; executionMs: number }[] = [];
for (const [sql, d] of detail) {
  if (!/^(WITH|UPDATE|INSERT|SELECT)/i.test(d.text.trim())) continue;
  await replay.query("BEGIN");
  try {
    const { rows } = await replay.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, COSTS OFF) ${d.text}`, d.values as unknown[]);
    const num = (label: string) => Number(rows.find((r) => r["QUERY PLAN"].startsWith(label))?.["QUERY PLAN"].match(/([\d.]+) ms/)?.[1]);
    explained.push({ sql, planningMs: num("Planning Time"), executionMs: num("Execution Time") });
  } catch (error) {
    explained.push({ sql: `${sql} (${(error as Error).message})`, planningMs: NaN, executionMs: NaN });
  } finally {
    await replay.query("ROLLBACK");
  }
}
const insert = [...detail.values()].find((d) => /^WITH ins AS \(\s*INSERT/i.test(d.text.trim()) || (/INSERT INTO/i.test(d.text) && /pg_notify/i.test(d.text)));
let prepared: { unnamedUs: number; namedUs: number } | null = null;
if (insert) {
  const time = async (named: boolean) => {
    await replay.query("BEGIN");
    const t = performance.now();
    for (let i = 0; i < 300; i++)
      await replay.query(
        named
          ? { name: "bench_probe_insert", text: insert.text, values: insert.values as unknown[] }
          : { text: insert.text, values: insert.values as unknown[] },
      );
    const us = ((performance.now() - t) * 1000) / 300;
    await replay.query("ROLLBACK");
    return us;
  };
  await time(true); // prepare once
  prepared = { unnamedUs: await time(false), namedUs: await time(true) };
}
await replay.query(`TRUNCATE ${table} RESTART IDENTITY`);
await replay.end();
writeFileSync(`${outDir}/forge-c${concurrency}.cpuprofile`, JSON.stringify(profile));
// Backends flush their statistics when they exit (the worker's pool just closed).
await sleep(800);
const statsAfter = await tableStats();
const dbAfter = await dbStats();
const wal = (await admin.query<{ b: string }>("SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS b", [dbAfter.wal, dbBefore.wal])).rows[0]!.b;
await admin.end();
const summary = {
  jobs: n,
  concurrency,
  seconds,
  rate: n / seconds,
  statementsPerJob: statements / n,
  commitsPerJob: (Number(dbAfter.commits) - Number(dbBefore.commits)) / n,
  deadlocks: Number(dbAfter.deadlocks) - Number(dbBefore.deadlocks),
  workerErrors: workerErrors.slice(0, 5),
  workerErrorCount: workerErrors.length,
  walBytesPerJob: Number(wal) / n,
  tupleUpdatesPerJob: (Number(statsAfter.upd) - Number(statsBefore.upd)) / n,
  hotUpdateShare: (Number(statsAfter.hot) - Number(statsBefore.hot)) / Math.max(1, Number(statsAfter.upd) - Number(statsBefore.upd)),
  nodeCpuUsPerJob: (cpu.user + cpu.system) / n,
  eventLoopUtilization: elu.utilization,
  statements: [...detail.entries()]
    .map(([sql, d]) => ({ sql, count: d.count, perJob: d.count / n, meanMs: d.ms / d.count, totalMs: d.ms, named: false }))
    .sort((a, b) => b.totalMs - a.totalMs),
  explained,
  preparedEnqueue: prepared,
};
writeFileSync(`${outDir}/forge-c${concurrency}.json`, JSON.stringify(summary, null, 2));
process.exit(0);
