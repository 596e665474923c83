// Issue 17.4: on PostgreSQL, the history table is range-partitioned by the UTC day jobs finished,
// and retention (pruneHistory) drops whole days. Issue 33: every backend has a history table, and
// ended jobs move there as they end; prune({ into: "history" }) moves the legacy ended rows an
// older version left in the live table (written here by SQL: helpers/legacy-rows.ts), counted
// once. Partitions are PostgreSQL's alone: the other backends refuse their calls with a clear
// error and write nothing.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  enqueue,
  enqueueMany,
  getJob,
  historyPartitions,
  JobError,
  processOne,
  prune,
  pruneHistory,
  retryJob,
  scheduleMaintenance,
  statusCounts,
} from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";
import { makeLegacy, recount } from "./helpers/legacy-rows.js";

const run = promisify(execFile);
const CLI = new URL("../bin/forge-jobs.cjs", import.meta.url).pathname;

const handlers = {
  ok: (payload: unknown) => ({ echoed: payload }),
  bad: () => {
    throw new Error("broken on purpose");
  },
};

/** Finishes every pending job of `queue` (ok → done, bad → failed). */
async function finishAll(t: TestDatabase, queue: string): Promise<void> {
  while (await processOne(handlers, { db: t.db, queue }));
}

describe.each(backends())("the history table ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const history = () => t.tableName("jobs_history");
  /** Sets when legacy rows of the live table finished, so that they land on chosen days (counted again after: recount). */
  async function finishedAt(ids: number[], iso: string): Promise<void> {
    const at = backend.name === "sqlite" ? Date.parse(iso) : backend.name === "mysql" ? iso.replace("T", " ").replace("Z", "") : iso;
    await t.sql(`UPDATE {jobs} SET finished_at = $1 WHERE id IN (${ids.map((_, i) => `$${i + 2}`).join(", ")})`, [at, ...ids]);
    await recount(t);
  }

  it("prune into history moves the legacy ended rows of the live table, counted once, getJob finding them before and after", async () => {
    const q = "legacy-moved";
    const ids = await enqueueMany(
      Array.from({ length: 5 }, (_, i) => ({ task: i === 4 ? "bad" : "ok", payload: { i }, tenant: i % 2 ? "acme" : "globex" })),
      { db: t.db, queue: q },
    );
    await finishAll(t, q);
    await makeLegacy(t, ids);
    expect((await t.sql(`SELECT id FROM {jobs} WHERE queue = $1`, [q])).length).toBe(5);
    expect((await statusCounts({ db: t.db, queue: q }))[0]!.counts).toMatchObject({ done: 4, failed: 1 });
    expect(await getJob(ids[1]!, { db: t.db })).toMatchObject({ status: "done", tenant: "acme", payload: { i: 1 }, result: { echoed: { i: 1 } } });

    expect(await prune({ db: t.db, olderThan: 0, into: "history", batchSize: 2 })).toBe(5);
    expect(await t.sql(`SELECT id FROM {jobs} WHERE queue = $1`, [q])).toEqual([]);
    expect((await t.sql(`SELECT id FROM {history} WHERE queue = $1`, [q])).length).toBe(5);
    expect((await statusCounts({ db: t.db, queue: q }))[0]!.counts).toMatchObject({ done: 4, failed: 1 });
    expect(await getJob(ids[1]!, { db: t.db })).toMatchObject({ status: "done", tenant: "acme", payload: { i: 1 }, result: { echoed: { i: 1 } } });
    expect((await getJob(ids[4]!, { db: t.db }))?.lastError).toContain("broken on purpose");
  });

  it("retryJob brings an ended failed job back from history into the live table and its queue, and it runs", async () => {
    const q = "retried-from-history";
    const id = await enqueue("bad", { n: 1 }, { db: t.db, queue: q, maxAttempts: 1, tenant: "acme" });
    await finishAll(t, q);
    expect(await t.sql(`SELECT id FROM {history} WHERE id = $1`, [id])).toEqual([{ id: expect.anything() }]);
    expect(await retryJob(id, { db: t.db, tenant: "someone-else" })).toBe(false);
    expect(await retryJob(id, { db: t.db, tenant: "acme" })).toBe(true);
    expect(await t.sql(`SELECT id FROM {history} WHERE id = $1`, [id])).toEqual([]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 1, maxAttempts: 2 });
    expect((await statusCounts({ db: t.db, queue: q }))[0]!.counts).toMatchObject({ pending: 1, failed: 0 });
    expect(await processOne({ bad: () => "fixed" }, { db: t.db, queue: q })).toBe(true);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: "fixed" });
    expect((await statusCounts({ db: t.db, queue: q }))[0]!.counts).toMatchObject({ pending: 0, done: 1, failed: 0 });
  });

  it("prune keeps an ended job in history while a job named after it ended still depends on it, and deletes it once that one ended", async () => {
    const q = "history-flows";
    const parent = await enqueue("ok", "parent", { db: t.db, queue: q });
    await finishAll(t, q);
    const child = await enqueue("ok", "child", { db: t.db, queue: q, dependsOn: [parent] });
    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus("60", "-")} WHERE id = $1`, [parent]);
    expect(await prune({ db: t.db, olderThan: 30 })).toBe(0);
    expect(await getJob(parent, { db: t.db })).toMatchObject({ status: "done" });
    await finishAll(t, q);
    expect((await getJob(child, { db: t.db }))?.status).toBe("done");
    expect(await prune({ db: t.db, olderThan: 30 })).toBe(1);
    expect(await getJob(parent, { db: t.db })).toBeNull();
  });

  if (backend.name !== "postgres") {
    it("history partitions are PostgreSQL only: pruneHistory, historyPartitions and the maintenance schedule say so and write nothing", async () => {
      const id = await enqueue("ok", 1, { db: t.db, queue: "refused" });
      await finishAll(t, "refused");
      await expect(pruneHistory({ db: t.db, olderThan: 0 })).rejects.toThrow(JobError);
      await expect(pruneHistory({ db: t.db, olderThan: 0 })).rejects.toThrow(/history partitions are PostgreSQL only.*leave pruneHistory out/);
      await expect(historyPartitions({ db: t.db })).rejects.toThrow(/PostgreSQL only/);
      await expect(scheduleMaintenance({ db: t.db, pruneHistory: { olderThan: 86400 } })).rejects.toThrow(/PostgreSQL only/);
      expect((await getJob(id, { db: t.db }))?.status).toBe("done");
    });
    return;
  }

  it("migration 8 creates a table partitioned by finished time", async () => {
    const [row] = await t.sql<{ kind: string; key: string }>(
      `SELECT c.relkind AS kind, pg_get_partkeydef(c.oid) AS key FROM pg_class c WHERE c.oid = $1::regclass`,
      [history()],
    );
    expect(row).toEqual({ kind: "p", key: "RANGE (finished_at)" });
  });

  it("moves legacy ended rows into one partition per UTC day; getJob still finds them, whole; the jobs table no longer holds them, the counts still do", async () => {
    const q = "moved";
    const ids = await enqueueMany(
      Array.from({ length: 9 }, (_, i) => ({ task: i === 8 ? "bad" : "ok", payload: { i }, tenant: i % 2 ? "acme" : "globex", maxAttempts: 1 })),
      { db: t.db, queue: q },
    );
    const pending = await enqueue("ok", "later", { db: t.db, queue: q });
    await finishAll(t, q);
    const fresh = await enqueue("ok", "fresh", { db: t.db, queue: q });
    await processOne(handlers, { db: t.db, queue: q });
    await makeLegacy(t, [...ids, pending, fresh]);
    // Three days of finished jobs, and one that finished just now (kept: younger than an hour).
    await finishedAt(ids.slice(0, 3), "2026-03-01T10:00:00Z");
    await finishedAt(ids.slice(3, 6), "2026-03-02T23:59:59Z");
    await finishedAt([...ids.slice(6), pending], "2026-03-04T00:00:00Z");
    const before = (await statusCounts({ db: t.db, queue: q }))[0]!.counts;
    expect(before).toMatchObject({ done: 10, failed: 1 });

    // Batches of 4: the mover walks oldest first across the day boundaries. The days around
    // today's exist already: ending writes make them ready.
    const ready = (await historyPartitions({ db: t.db })).map((p) => p.day);
    expect(await prune({ db: t.db, olderThan: 3600, into: "history", batchSize: 4 })).toBe(10);
    expect((await historyPartitions({ db: t.db })).map((p) => p.day)).toEqual(["2026-03-01", "2026-03-02", "2026-03-04", ...ready]);
    const perDay = await t.sql<{ day: string; n: string }>(
      `SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*) AS n, tableoid::regclass::text AS part FROM ${history()} WHERE queue = $1 GROUP BY 1, 3 ORDER BY 1`,
      [q],
    );
    expect(perDay.map((r) => [r.day, Number(r.n), (r as { part?: string }).part?.replace(/^.*\./, "").replaceAll('"', "")])).toEqual([
      ["2026-03-01", 3, "jobs_history_p20260301"],
      ["2026-03-02", 3, "jobs_history_p20260302"],
      ["2026-03-04", 4, "jobs_history_p20260304"],
    ]);
    expect(await t.sql(`SELECT id FROM {jobs} WHERE queue = $1`, [q])).toEqual([{ id: expect.anything() }]);

    const archived = await getJob(ids[1]!, { db: t.db });
    expect(archived).toMatchObject({ id: ids[1], status: "done", queue: q, tenant: "acme", payload: { i: 1 }, result: { echoed: { i: 1 } } });
    expect(await getJob(ids[1]!, { db: t.db, tenant: "globex" })).toBeNull();
    expect((await getJob(ids[8]!, { db: t.db }))?.lastError).toContain("broken on purpose");
    expect((await getJob(fresh, { db: t.db }))?.status).toBe("done");
    // The counts are both tables': a move changes none.
    expect((await statusCounts({ db: t.db, queue: q }))[0]!.counts).toMatchObject({ done: 10, failed: 1 });
  });

  it("retryJob brings a legacy failed job moved by prune back into its queue, and it runs", async () => {
    const q = "restored";
    const id = await enqueue("bad", { n: 1 }, { db: t.db, queue: q, maxAttempts: 1 });
    await finishAll(t, q);
    await makeLegacy(t, [id]);
    expect(await prune({ db: t.db, olderThan: 0, into: "history", statuses: ["failed"] })).toBeGreaterThanOrEqual(1);
    expect(await t.sql(`SELECT id FROM {jobs} WHERE id = $1`, [id])).toEqual([]);
    expect(await retryJob(id, { db: t.db, tenant: "someone-else" })).toBe(false);
    expect(await retryJob(id, { db: t.db })).toBe(true);
    expect(await t.sql(`SELECT id FROM ${history()} WHERE id = $1`, [id])).toEqual([]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 1, maxAttempts: 2 });
    expect(await processOne({ bad: () => "fixed" }, { db: t.db, queue: q })).toBe(true);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: "fixed" });
  });

  it("two movers at once move every job exactly once", async () => {
    const q = "racing";
    const ids = await enqueueMany(
      Array.from({ length: 300 }, (_, i) => ({ task: "ok", payload: i })),
      { db: t.db, queue: q },
    );
    await t.sql(`UPDATE {jobs} SET status = 'done', finished_at = now() - interval '2 days' WHERE queue = $1`, [q]);
    await recount(t);
    const moved = await Promise.all([0, 1, 2].map(() => prune({ db: t.db, olderThan: 86400, into: "history", batchSize: 25 })));
    const [row] = await t.sql<{ n: string; distinct: string }>(`SELECT count(*) AS n, count(DISTINCT id) AS distinct FROM ${history()} WHERE queue = $1`, [q]);
    expect(Number(row!.n)).toBe(ids.length);
    expect(Number(row!.distinct)).toBe(ids.length);
    expect(moved.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(ids.length);
    expect(await t.sql(`SELECT id FROM {jobs} WHERE queue = $1`, [q])).toEqual([]);
    expect((await statusCounts({ db: t.db, queue: q }))[0]!.counts).toMatchObject({ done: ids.length });
  });

  it("pruneHistory drops the days past the retention, whole, and keeps the rest", async () => {
    const before = (await historyPartitions({ db: t.db })).map((p) => p.day);
    expect(before).toContain("2026-03-01");
    const old = await t.sql<{ id: string }>(`SELECT id FROM ${history()} WHERE finished_at < '2026-03-03T00:00:00Z'`);
    expect(old.length).toBe(6);
    // The database's clock says how old a day is: everything before 2026-03-03 is dropped with a
    // retention reaching to 2026-03-03 00:00 UTC.
    const [{ age }] = (await t.sql<{ age: number }>(`SELECT extract(epoch FROM now() - '2026-03-03T00:00:00Z'::timestamptz)::float8 AS age`)) as [
      { age: number },
    ];
    expect(await pruneHistory({ db: t.db, olderThan: Math.floor(age) })).toEqual(["2026-03-01", "2026-03-02"]);
    expect((await historyPartitions({ db: t.db })).map((p) => p.day)).toEqual(before.filter((d) => d > "2026-03-02"));
    expect(await t.sql(`SELECT to_regclass($1) AS t`, [t.tableName("jobs_history_p20260301")])).toEqual([{ t: null }]);
    expect(await getJob(Number(old[0]!.id), { db: t.db })).toBeNull();
    expect(await pruneHistory({ db: t.db, olderThan: Math.floor(age) })).toEqual([]);
  });

  it("a finished job a waiting job still needs is not moved", async () => {
    const q = "flows";
    const parent = await enqueue("ok", "parent", { db: t.db, queue: q });
    await processOne(handlers, { db: t.db, queue: q });
    await makeLegacy(t, [parent]);
    const child = await enqueue("ok", "child", { db: t.db, queue: q, dependsOn: [parent], availableIn: 3600 });
    await prune({ db: t.db, olderThan: 0, into: "history" });
    expect((await t.sql(`SELECT id FROM {jobs} WHERE id = $1`, [parent])).length).toBe(1);
    expect((await getJob(child, { db: t.db }))?.status).toBe("pending");
  });

  it("scheduleMaintenance declares the moves and the retention; the CLI lists, moves and drops", async () => {
    const declared = await scheduleMaintenance({
      db: t.db,
      prune: { olderThan: 7 * 86400, into: "history" },
      pruneHistory: { olderThan: 90 * 86400, cron: "@daily" },
    });
    expect(declared).toMatchObject({ "forge-jobs:prune": "created", "forge-jobs:prune-history": "created" });
    await expect(scheduleMaintenance({ db: t.db, prune: { olderThan: 1, into: "archive" as "history" } })).rejects.toThrow(/prune.into must be "history"/);
    await scheduleMaintenance({ db: t.db });

    const cli = (...args: string[]) => run(process.execPath, [CLI, ...args, "--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])]);
    const q = "cli";
    await enqueue("ok", null, { db: t.db, queue: q });
    await finishAll(t, q);
    expect((await cli("prune", "--older-than", "0s", "--into", "history")).stdout).toMatch(/^moved to the history table \d+ finished job\(s\) older than 0s/);
    const listed = JSON.parse((await cli("history", "--json")).stdout) as { day: string }[];
    expect(listed.map((d) => d.day)).toContain(new Date().toISOString().slice(0, 10));
    expect((await cli("history")).stdout).toMatch(/^DAY\s+ROWS\s+SIZE\n/);
    await expect(cli("prune", "--older-than", "1d", "--into", "archive")).rejects.toMatchObject({ stderr: expect.stringMatching(/--into takes "history"/) });
    expect((await cli("history", "--drop-older-than", "3650d")).stdout).toBe("no day of history ended more than 3650d ago\n");
  });
});
