// Issue 33.5: a database migrated from a version that kept ended jobs in the jobs table still
// holds them there ("legacy rows"); the online upgrade moves them into history in batches while
// workers run, each batch a transaction of its own, resumable when killed, counts exact throughout.
// The legacy rows are written the way an older version left them (helpers/legacy.ts): the schema
// is migrated up to the last version before the live-only table, rows are inserted by SQL and
// counted by that version's triggers, then the remaining migrations run.
import { afterEach, describe, expect, it } from "vitest";
import { connect, createWorker, enqueue, latestVersion, statusCounts, type JobsDatabase } from "../src/index.js";
import { upgradeFinished } from "../src/maintenance/upgrade.js";
import { backends, tableNames, waitFor, type Backend } from "./helpers/backends.js";
import { BEFORE_LIVE_ONLY, leaveLegacyRows } from "./helpers/legacy.js";
import { cli, runCli } from "./helpers/cli.js";

const LEGACY = 5000;
const QUEUES = ["old_a", "old_b"];
/** Minutes of the chart's ring compared before and after (well inside its horizon). */
const RECENT_MINUTES = 40;

interface Legacy {
  db: JobsDatabase;
  url: string;
  schema: string | undefined;
  sql<R extends object = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  /** The legacy rows' ids, in order. */
  ids: number[];
  close(): Promise<void>;
}

/** A queue left by an older version with `n` ended jobs in its jobs table, one a minute back from now, migrated to the current schema. */
async function legacyDatabase(backend: Backend, n: number): Promise<Legacy> {
  const place = await backend.blank();
  const applied = await leaveLegacyRows(place.url, place.schema, n, 60);
  const db = connect(place.url, { ...(place.schema ? { schema: place.schema } : {}), ...(backend.name === "sqlite" ? {} : { poolSize: 10 }) });
  expect(applied[0]).toBe(BEFORE_LIVE_ONLY + 1);
  expect(applied.at(-1)).toBe(latestVersion(db.dialect));
  const sql = async <R extends object>(text: string, params?: unknown[]) => (await db.executor.query<R>(tableNames(db, text), params)).rows;
  const ids = (await sql<{ id: number | string }>("SELECT id FROM {jobs} ORDER BY id")).map((r) => Number(r.id));
  expect(ids).toHaveLength(n);
  return {
    db,
    url: place.url,
    schema: place.schema,
    sql,
    ids,
    close: async () => {
      await db.close();
      await place.drop();
    },
  };
}

/** Every job in exactly one of the two tables, ended ones in the live table counted as legacy. */
async function expectOnePlaceEach(t: Legacy, expectedIds: number[]): Promise<{ live: number; history: number }> {
  const live = (await t.sql<{ id: number | string }>("SELECT id FROM {jobs}")).map((r) => Number(r.id));
  const history = (await t.sql<{ id: number | string }>("SELECT id FROM {history}")).map((r) => Number(r.id));
  const inLive = new Set(live);
  expect(history.filter((id) => inLive.has(id))).toEqual([]);
  expect([...live, ...history].sort((a, b) => a - b)).toEqual([...expectedIds].sort((a, b) => a - b));
  return { live: live.length, history: history.length };
}

type Counts = Record<"pending" | "running" | "done" | "failed" | "cancelled" | "waiting", number>;

/** statusCounts per queue and per tenant equal a count over both tables; the chart's recent minutes equal the ended rows'. */
async function expectCountsExact(t: Legacy, queues: string[], since: number): Promise<void> {
  for (const queue of queues) {
    for (const tenant of [undefined, "acme"]) {
      const rows = await t.sql<{ status: keyof Counts; n: number | string }>(
        `SELECT status, count(*) AS n FROM {all} WHERE queue = $1${tenant ? " AND tenant = $2" : ""} GROUP BY status`,
        tenant ? [queue, tenant] : [queue],
      );
      const truth: Counts = { pending: 0, running: 0, done: 0, failed: 0, cancelled: 0, waiting: 0 };
      for (const row of rows) truth[row.status] = Number(row.n);
      const [status] = await statusCounts({ db: t.db, queue, ...(tenant ? { tenant } : {}) });
      expect({ queue, tenant, counts: status?.counts }).toEqual({ queue, tenant, counts: truth });
    }
  }
  const minutes = await recentMinutes(t, since);
  expect(minutes).toEqual(await endedMinutes(t, since));
  // One legacy job a minute, two in three done or failed: the comparison is not of two empty sets.
  expect(Object.keys(minutes).length).toBeGreaterThan(20);
}

/** The chart's counts (jobs_minutes) from minute `since` on, per queue, status and minute. */
async function recentMinutes(t: Legacy, since: number): Promise<Record<string, number>> {
  const rows = await t.sql<{ queue: string; status: string; minute: number | string; n: number | string }>(
    `SELECT queue, status, minute, SUM(n) AS n FROM ${t.db.minutesTable} WHERE minute >= $1 GROUP BY queue, status, minute`,
    [since],
  );
  const out: Record<string, number> = {};
  for (const r of rows) if (Number(r.n) !== 0) out[`${r.queue}/${r.status}/${r.minute}`] = Number(r.n);
  return out;
}

/** The same, counted from the ended rows of both tables. */
async function endedMinutes(t: Legacy, since: number): Promise<Record<string, number>> {
  const rows = await t.sql<{ queue: string; status: string; finished_at: Date | number }>(
    "SELECT queue, status, finished_at FROM {all} WHERE status IN ('done', 'failed') AND finished_at IS NOT NULL",
  );
  const out: Record<string, number> = {};
  for (const r of rows) {
    const minute = Math.floor(new Date(r.finished_at).getTime() / 60_000);
    if (minute < since) continue;
    const key = `${r.queue}/${r.status}/${minute}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

const sinceNow = () => Math.floor(Date.now() / 60_000) - RECENT_MINUTES;

describe.each(backends())("online upgrade of ended jobs left in the live table ($name)", (backend) => {
  let t: Legacy | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it("a batch that fails midway leaves every job in one place and the counts exact; a rerun finishes", async () => {
    t = await legacyDatabase(backend, LEGACY);
    const since = sinceNow();
    await expectCountsExact(t, QUEUES, since);
    // A row of the third batch that history refuses: the batch has taken its rows out of the
    // counts when the move fails.
    const planted = t.ids[2500]!;
    const history = t.db.historyTable;
    const name =
      backend.name === "sqlite" ? "upgrade_planted" : backend.name === "postgres" ? `"${t.schema}".upgrade_planted` : `\`${t.schema}\`.upgrade_planted`;
    if (backend.name === "postgres") {
      await t.db.executor.query(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'planted failure'; END $$`);
      await t.db.executor.query(
        `CREATE TRIGGER upgrade_planted BEFORE INSERT ON ${history} FOR EACH ROW WHEN (NEW.id = ${planted}) EXECUTE FUNCTION ${name}()`,
      );
    } else if (backend.name === "sqlite") {
      await t.db.executor.query(
        `CREATE TRIGGER ${name} BEFORE INSERT ON jobs_history WHEN NEW.id = ${planted} BEGIN SELECT RAISE(ABORT, 'planted failure'); END`,
      );
    } else {
      await t.db.executor.query(
        `CREATE TRIGGER ${name} BEFORE INSERT ON ${history} FOR EACH ROW IF NEW.id = ${planted} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'planted failure'; END IF`,
      );
    }
    const batches: number[] = [];
    await expect(upgradeFinished(t.db, { batchSize: 1000, onBatch: (moved) => batches.push(moved) })).rejects.toThrow(/planted failure/);
    expect(batches).toEqual([1000, 2000]);
    expect(await expectOnePlaceEach(t, t.ids)).toEqual({ live: LEGACY - 2000, history: 2000 });
    await expectCountsExact(t, QUEUES, since);

    await t.db.executor.query(backend.name === "postgres" ? `DROP TRIGGER upgrade_planted ON ${history}` : `DROP TRIGGER ${name}`);
    expect(await upgradeFinished(t.db, { batchSize: 1000 })).toEqual({ moved: LEGACY - 2000, remaining: 0, gaveWay: false });
    expect(await expectOnePlaceEach(t, t.ids)).toEqual({ live: 0, history: LEGACY });
    await expectCountsExact(t, QUEUES, since);
  });

  it("forge-jobs upgrade killed with SIGKILL midway, then run again, finishes with every job in one place; doctor tells before and after", async () => {
    t = await legacyDatabase(backend, LEGACY);
    const since = sinceNow();
    const common = ["--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])];
    const before = await cli(["doctor", ...common]);
    expect(before.code).toBe(1);
    expect(before.stdout).toContain(`PROBLEM ${LEGACY} ended jobs still in the live table: run forge-jobs upgrade or let a worker do it\n`);

    const db = t.db;
    let killed = false;
    const run = cli(["upgrade", "--batch-size", "50", ...common], {
      onStart: (child) => {
        void waitFor(
          "a few batches moved",
          async () => Number((await db.executor.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${db.historyTable}`)).rows[0]!.n) >= 500,
          60_000,
          5,
        ).then(() => {
          killed = child.kill("SIGKILL");
        });
      },
    });
    const first = await run;
    expect(killed).toBe(true);
    expect(first.code).toBe(null);
    const midway = await expectOnePlaceEach(t, t.ids);
    expect(midway.history).toBeGreaterThanOrEqual(500);
    expect(midway.live).toBeGreaterThan(0);
    // Whole batches only: nothing half-moved.
    expect(midway.history % 50).toBe(0);
    await expectCountsExact(t, QUEUES, since);

    const second = await cli(["upgrade", ...common]);
    expect(second.stderr).toBe("");
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(new RegExp(`^moved ${midway.live} ended job\\(s\\) from the live table into history in \\d+\\.\\ds\\n`));
    expect(second.stdout).toContain("the live table holds no ended job: the upgrade is complete\n");
    expect(await expectOnePlaceEach(t, t.ids)).toEqual({ live: 0, history: LEGACY });
    await expectCountsExact(t, QUEUES, since);

    const after = await runCli(["doctor", ...common], { env: { DATABASE_URL: "" } });
    expect(after.stdout).toContain("ok      no ended job left in the live table\n");
    expect(after.code).toBe(0);
  }, 120_000);

  it("upgrading while a worker runs jobs loses nothing, and the worker finishes the upgrade on its own", async () => {
    t = await legacyDatabase(backend, LEGACY);
    const since = sinceNow();
    const db = t.db;
    const runs = new Map<number, number>();
    const worker = createWorker(
      { live: (_payload, ctx) => void runs.set(ctx.job.id, (runs.get(ctx.job.id) ?? 0) + 1) },
      { db, queue: "live", concurrency: 4, pollInterval: 0.05 },
    );
    const running = worker.run();
    const live: number[] = [];
    let enqueuing = true;
    const enqueuer = (async () => {
      while (enqueuing || live.length < 200) live.push(await enqueue("live", null, { db, queue: "live" }));
    })();
    const result = await upgradeFinished(db, { batchSize: 250 });
    enqueuing = false;
    await enqueuer;
    await waitFor(
      "every live job done",
      async () => runs.size === live.length && (await statusCounts({ db, queue: "live" }))[0]?.counts.done === live.length,
      30_000,
    );
    // The worker's own pass (a second after its start) may have moved some legacy rows first.
    expect(result.moved).toBeGreaterThan(0);
    expect(result.remaining).toBe(0);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(await expectOnePlaceEach(t, [...t.ids, ...live])).toEqual({ live: 0, history: LEGACY + live.length });
    await expectCountsExact(t, [...QUEUES, "live"], since);
    await worker.stop();
    await running;

    // A second database left by an older version, with a worker alone.
    const alone = await legacyDatabase(backend, 500);
    try {
      const w = createWorker({ live: () => undefined }, { db: alone.db, queue: "live", pollInterval: 0.05 });
      const r = w.run();
      await waitFor(
        "the worker's background upgrade",
        async () => (await alone.sql<{ n: number | string }>("SELECT count(*) AS n FROM {jobs}"))[0]!.n == 0,
        30_000,
        50,
      );
      await w.stop();
      await r;
      expect(await expectOnePlaceEach(alone, alone.ids)).toEqual({ live: 0, history: 500 });
      await expectCountsExact(alone, QUEUES, since);
    } finally {
      await alone.close();
    }
  }, 120_000);
});
