import { mkdirSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { loadForge } from "../forge.js";
import { MARIADB_URL, SQLITE_DIR } from "../lib/env.js";
import { FIXTURE_IDS_BELOW } from "../lib/fixtures.js";
import { waitQuiet } from "../lib/metrics.js";
import { percentile, sleep, sorted } from "../lib/stats.js";

type Forge = Awaited<ReturnType<typeof loadForge>>;
type Db = ReturnType<Forge["connect"]>;

/** Finished rows in the SQLite and MariaDB tables (smaller than PostgreSQL's: these are one-writer or slower to fill). */
const ROWS = Number(process.env.BENCH_10M_SMALL_ROWS ?? 1_000_000);
const PRUNED = Math.round(ROWS / 10);
const STATUS_CALLS = 200;
const LANES = 4;
const BASELINE_SECONDS = 10;

/** History has no column defaults (rows come from the live table): every NOT NULL column is written. */
const COLUMNS =
  "id, queue, task, payload, status, priority, attempts, max_attempts, group_key, concurrency_key, snoozes, max_snoozes, deps_pending, has_dependents, " +
  "run_at, created_at, updated_at, started_at, finished_at";
const CONSTANTS = "0, 1, 1, '', '', 0, 100, 0, 0";

/**
 * Rows `from` … `from + count - 1` (their ids), done, finished thirty days ago (`old`) or a day
 * ago, written straight into history (where ended jobs live since migration 14) by one statement
 * per 100,000; history's triggers count them.
 */
async function fill(db: Db, from: number, count: number, old: boolean): Promise<void> {
  const days = old ? 30 : 1;
  for (let at = from; at < from + count; at += 100_000) {
    const to = Math.min(from + count, at + 100_000) - 1;
    if (db.dialect === "sqlite") {
      const t = `(${db.sql.now} - ${days} * 86400000)`;
      await db.executor.query(
        `WITH RECURSIVE g(x) AS (SELECT $1 UNION ALL SELECT x + 1 FROM g WHERE x < $2)
         INSERT INTO ${db.historyTable} (${COLUMNS})
         SELECT x, 'default', 'noop', json_object('i', x), 'done', ${CONSTANTS}, ${t}, ${t}, ${t}, ${t}, ${t} FROM g`,
        [at, to],
      );
    } else {
      const t = `(UTC_TIMESTAMP(6) - INTERVAL ${days} DAY)`;
      await db.executor.query(
        `INSERT INTO ${db.historyTable} (${COLUMNS})
         SELECT seq, 'default', 'noop', CONCAT('{"i":', seq, '}'), 'done', ${CONSTANTS}, ${t}, ${t}, ${t}, ${t}, ${t} FROM seq_${at}_to_${to}`,
      );
    }
  }
}

/** The live table's next ids above FIXTURE_IDS_BELOW (never lowered): no job takes a fixture row's id. */
async function liveIdsAbove(db: Db): Promise<void> {
  if (db.dialect === "sqlite") {
    const { rowCount } = await db.executor.query(`UPDATE sqlite_sequence SET seq = max(seq, $1) WHERE name = 'jobs'`, [FIXTURE_IDS_BELOW]);
    if (rowCount === 0) await db.executor.query(`INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', $1)`, [FIXTURE_IDS_BELOW]);
  } else {
    const { rows } = await db.executor.query<{ Auto_increment: number | string | null }>(`SHOW TABLE STATUS FROM bench_forge_1m LIKE 'jobs'`);
    if (Number(rows[0]?.Auto_increment ?? 0) <= FIXTURE_IDS_BELOW) await db.executor.query(`ALTER TABLE ${db.table} AUTO_INCREMENT = ${FIXTURE_IDS_BELOW + 1}`);
  }
}

/** The highest fixture id in history (0: none). */
async function highestFixtureId(db: Db): Promise<number> {
  const { rows } = await db.executor.query<{ n: number | string | null }>(`SELECT max(id) AS n FROM ${db.historyTable} WHERE id < $1`, [FIXTURE_IDS_BELOW]);
  return Number(rows[0]?.n ?? 0);
}

function summary(values: number[]): { p50: number; p99: number; n: number } {
  const s = sorted(values);
  return { p50: percentile(s, 50), p99: percentile(s, 99), n: s.length };
}

async function lanes(forge: Forge, db: Db, until: Promise<unknown>): Promise<number[]> {
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
        // better-sqlite3 answers synchronously: without a turn of the event loop, these lanes
        // are one chain of microtasks and the timer that ends the baseline never fires.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }),
  );
  return ms;
}

/**
 * The same questions as the PostgreSQL part, smaller: statusCounts latency and the old
 * whole-table count over ROWS finished rows kept in history, and a prune of a tenth of them while four lanes
 * claim and complete. One round: the figures are for orientation.
 */
export async function otherBackends(quietWaitMs: number): Promise<Record<string, unknown>> {
  const forge = await loadForge();
  const out: Record<string, unknown> = { rows: ROWS, pruned: PRUNED };
  const wanted = (process.env.BENCH_10M_BACKENDS ?? "postgres,sqlite,mariadb").split(",");
  for (const name of ["sqlite", "mariadb"] as const) {
    if (!wanted.includes(name)) continue;
    mkdirSync(SQLITE_DIR, { recursive: true });
    const db = name === "sqlite" ? forge.connect(`sqlite:${SQLITE_DIR}/forge-1m.db`) : forge.connect(MARIADB_URL, { schema: "bench_forge_1m" });
    try {
      await forge.migrate({ db });
      const [have] = (await forge.statusCounts({ db, queue: "default" })).map((s) => s.counts.done);
      const t0 = performance.now();
      // A fixture of before migration 14 (done rows in the live table) is written again, in history.
      const legacy = (await db.executor.query(`SELECT 1 FROM ${db.table} WHERE status IN ('done', 'failed', 'cancelled') LIMIT 1`)).rows.length > 0;
      if ((have ?? 0) < ROWS || legacy) {
        await db.executor.query(`DELETE FROM ${db.table}`);
        await db.executor.query(`DELETE FROM ${db.historyTable}`);
        await fill(db, 1, PRUNED, true);
        await fill(db, PRUNED + 1, ROWS - PRUNED, false);
      }
      await liveIdsAbove(db);
      const fillSeconds = (performance.now() - t0) / 1000;
      await forge.enqueueMany(
        Array.from({ length: 1000 }, (_, i) => ({ task: "noop", payload: { i }, queue: "backlog" })),
        { db },
      );
      await waitQuiet(quietWaitMs);
      for (let i = 0; i < 5; i++) await forge.statusCounts({ db });
      const status: number[] = [];
      for (let i = 0; i < STATUS_CALLS; i++) {
        const s0 = performance.now();
        await forge.statusCounts({ db });
        status.push(performance.now() - s0);
      }
      const whole: number[] = [];
      for (let i = 0; i < 3; i++) {
        const s0 = performance.now();
        await db.executor.query(`SELECT queue, status, count(*) AS n FROM ${db.historyTable} GROUP BY queue, status`);
        whole.push(performance.now() - s0);
      }
      await waitQuiet(quietWaitMs);
      const base = summary(await lanes(forge, db, sleep(BASELINE_SECONDS * 1000)));
      const p0 = performance.now();
      const pruning = forge.prune({ db, olderThan: 7 * 86400, batchSize: 1000 });
      const during = await lanes(forge, db, pruning);
      const deleted = await pruning;
      const seconds = (performance.now() - p0) / 1000;
      const d = summary(during);
      // Put the pruned rows back for the next run, and drop the probe's and the backlog's jobs.
      for (const table of [db.table, db.historyTable]) await db.executor.query(`DELETE FROM ${table} WHERE queue IN ('probe', 'backlog')`);
      await fill(db, (await highestFixtureId(db)) + 1, deleted, true);
      const result = {
        fillSeconds,
        status: summary(status),
        wholeTableCountMs: whole,
        prune: { deleted, seconds, base, during: d, baseRate: base.n / BASELINE_SECONDS, duringRate: d.n / seconds },
      };
      out[name] = result;
      console.log(
        `  ${name}, ${ROWS.toLocaleString("en-US")} rows: statusCounts p50/p99 ${result.status.p50.toFixed(2)}/${result.status.p99.toFixed(2)} ms (whole-table count ${whole.map((v) => v.toFixed(0)).join(", ")} ms); ` +
          `prune ${deleted} in ${seconds.toFixed(1)} s, claim+complete p50/p99 ${base.p50.toFixed(2)}/${base.p99.toFixed(2)} ms without, ${d.p50.toFixed(2)}/${d.p99.toFixed(2)} ms during`,
      );
    } catch (error) {
      out[name] = { error: (error as Error).message };
      console.log(`  ${name}: failed: ${(error as Error).message}`);
    } finally {
      await db.close();
    }
  }
  return out;
}
