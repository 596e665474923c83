// Issue 17.4: statusCounts reads finished jobs from counts kept by triggers (migration 7), and
// prune deletes in bounded batches. The counts are checked against a count of the table itself
// after every kind of write that moves a job into or out of a finished state.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, JobError, JobsDatabase, processOne, prune, reclaim, retryJob, statusCounts } from "../src/index.js";
import type { Executor } from "../src/db/executor.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

type Counts = { pending: number; running: number; done: number; failed: number; cancelled: number; waiting: number };

describe.each(backends())("finished-job counts and batched prune ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** What a count over the table says, the reference the kept counts must match. */
  async function truth(queue: string, tenant?: string): Promise<Counts> {
    const rows = await t.sql<{ status: keyof Counts; n: number | string }>(
      `SELECT status, count(*) AS n FROM {jobs} WHERE queue = $1${tenant ? " AND tenant = $2" : ""} GROUP BY status`,
      tenant ? [queue, tenant] : [queue],
    );
    const counts: Counts = { pending: 0, running: 0, done: 0, failed: 0, cancelled: 0, waiting: 0 };
    for (const row of rows) counts[row.status] = Number(row.n);
    return counts;
  }

  async function counted(queue: string, tenant?: string): Promise<Counts> {
    const [status] = await statusCounts({ db: t.db, queue, ...(tenant ? { tenant } : {}) });
    return status!.counts as Counts;
  }

  async function expectExact(queue: string, expected: Partial<Counts>): Promise<void> {
    const reference = await truth(queue);
    expect(reference).toMatchObject(expected);
    expect(await counted(queue)).toEqual(reference);
    expect(await counted(queue, "acme")).toEqual(await truth(queue, "acme"));
  }

  it("stay exact through complete, fail, cancel, retry, reclaim and prune, per queue and per tenant", async () => {
    const q = "exact";
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push(await enqueue(i < 3 ? "ok" : "bad", null, { db: t.db, queue: q, ...(i % 2 ? { tenant: "acme" } : {}) }));
    const handlers = {
      ok: () => "fine",
      bad: () => {
        throw new Error("no");
      },
    };
    for (let i = 0; i < 4; i++) await processOne(handlers, { db: t.db, queue: q });
    await expectExact(q, { done: 3, failed: 1, pending: 2 });

    expect(await cancelJob(ids[4]!, { db: t.db })).toBe(true);
    await expectExact(q, { done: 3, failed: 1, cancelled: 1, pending: 1 });

    expect(await retryJob(ids[3]!, { db: t.db })).toBe(true);
    expect(await retryJob(ids[4]!, { db: t.db })).toBe(true);
    await expectExact(q, { done: 3, failed: 0, cancelled: 0, pending: 3 });

    // A job whose worker vanished on its last attempt: reclaim fails it.
    await t.sql(
      `UPDATE {jobs} SET status = 'running', attempts = max_attempts, started_at = ${t.db.sql.now}, claim_token = $1, locked_until = ${t.db.sql.nowPlus("60", "-")}, heartbeat_at = ${t.db.sql.nowPlus("600", "-")} WHERE id = $2`,
      [randomUUID(), ids[5]],
    );
    await expectExact(q, { running: 1, pending: 2 });
    expect((await reclaim({ db: t.db, queue: q, lease: 30 })).map((r) => r.status)).toEqual(["failed"]);
    await expectExact(q, { running: 0, failed: 1 });

    // An operator's own SQL counts too: the triggers see every write.
    await t.sql("UPDATE {jobs} SET queue = 'elsewhere' WHERE id = $1", [ids[0]]);
    await expectExact(q, { done: 2 });
    await expectExact("elsewhere", { done: 1 });

    await t.sql(`UPDATE {jobs} SET finished_at = ${t.db.sql.nowPlus("7200", "-")} WHERE queue = $1 AND status IN ('done', 'failed')`, [q]);
    expect(await prune({ db: t.db, olderThan: 3600, statuses: ["done"] })).toBe(2);
    await expectExact(q, { done: 0, failed: 1 });
    expect(await prune({ db: t.db, olderThan: 3600 })).toBe(1);
    await expectExact(q, { done: 0, failed: 0, pending: 2 });
  });

  // Migration 11: in a trigger or a CHECK, SQLite evaluates an IN list of three values by filling
  // a temporary B-tree, on every row the trigger sees (each claimed, started or completed job).
  it.runIf(backend.name === "sqlite")("SQLite's counting triggers and jobs_counts test the status without an IN list of three values", async () => {
    const objects = await t.sql<{ name: string; sql: string }>(
      `SELECT name, sql FROM sqlite_schema WHERE (type = 'trigger' AND name LIKE 'jobs_count%') OR (type = 'table' AND name = 'jobs_counts')`,
    );
    expect(objects.map((r) => r.name).sort()).toEqual([
      "jobs_count_delete",
      "jobs_count_insert",
      "jobs_count_update_new",
      "jobs_count_update_old",
      "jobs_counts",
    ]);
    for (const { name, sql } of objects) expect(sql, name).not.toMatch(/IN \('[a-z]+', '[a-z]+', '[a-z]+'\)/);
  });

  it("lose no increment when completions run concurrently on several connections", async () => {
    const q = "concurrent";
    const total = 120;
    for (let i = 0; i < total; i++) await enqueue("ok", { i }, { db: t.db, queue: q, ...(i % 3 === 0 ? { tenant: "acme" } : {}) });
    const loop = async () => {
      while (await processOne({ ok: () => null }, { db: t.db, queue: q }));
    };
    await Promise.all(Array.from({ length: 6 }, loop));
    await expectExact(q, { done: total, pending: 0 });
    if (backend.name !== "sqlite") {
      // Spread over shards, not one row every completion updates.
      const [shards] = await t.sql<{ n: number | string }>(`SELECT count(DISTINCT shard) AS n FROM ${t.db.countsTable} WHERE queue = $1`, [q]);
      expect(Number(shards!.n)).toBeGreaterThan(1);
    }
  });

  it("prune deletes the old finished jobs of the statuses asked, oldest first, in statements of batchSize rows", async () => {
    const q = "batched";
    const ids: number[] = [];
    for (let i = 0; i < 30; i++) ids.push(await enqueue("ok", null, { db: t.db, queue: q }));
    for (let i = 0; i < 30; i++) await processOne({ ok: () => null }, { db: t.db, queue: q });
    // 25 old, 5 recent; two of the old ones failed, one is back to pending.
    await t.sql(`UPDATE {jobs} SET finished_at = ${t.db.sql.nowPlus("7200", "-")} WHERE queue = $1 AND id <= $2`, [q, ids[24]]);
    await t.sql("UPDATE {jobs} SET status = 'failed' WHERE id IN ($1, $2)", [ids[0], ids[1]]);
    await t.sql("UPDATE {jobs} SET status = 'pending', finished_at = NULL WHERE id = $1", [ids[2]]);
    for (const batchSize of [0, 1.5, 100_001, "10"]) {
      await expect(prune({ db: t.db, olderThan: 3600, batchSize: batchSize as number })).rejects.toThrow(JobError);
    }
    expect((await truth(q)).done).toBe(27);

    const deletes: string[] = [];
    const inner = t.db.executor;
    const spy: Executor = Object.create(inner, {
      // The jobs' deletes only (after them, prune also drops the dependency edges of pruned jobs).
      query: {
        value: (sql: string, params?: unknown[], name?: string) => (
          /^\s*DELETE/.test(sql) && !/^\s*DELETE FROM \S*jobs_dependencies/.test(sql) && deletes.push(sql),
          inner.query(sql, params, name)
        ),
      },
    }) as Executor;
    expect(await prune({ db: new JobsDatabase(spy, t.db.settings), olderThan: 3600, statuses: ["done"], batchSize: 10 })).toBe(22);
    expect(deletes).toHaveLength(3);
    await expectExact(q, { done: 5, failed: 2, pending: 1 });
    expect(await prune({ db: t.db, olderThan: 3600, statuses: ["failed", "cancelled"], batchSize: 1 })).toBe(2);
    await expectExact(q, { done: 5, failed: 0, pending: 1 });
  });

  it("prune gives the event loop a turn between batches (SQLite answers synchronously: a worker's timers must not wait for the whole prune)", async () => {
    const q = "turns";
    for (let i = 0; i < 20; i++) await enqueue("ok", null, { db: t.db, queue: q });
    for (let i = 0; i < 20; i++) await processOne({ ok: () => null }, { db: t.db, queue: q });
    await t.sql(`UPDATE {jobs} SET finished_at = ${t.db.sql.nowPlus("7200", "-")} WHERE queue = $1`, [q]);
    let fired = 0;
    const timer = setInterval(() => fired++, 0);
    const deleted = await prune({ db: t.db, olderThan: 3600, batchSize: 2 });
    const firedDuring = fired;
    clearInterval(timer);
    expect(deleted).toBe(20);
    expect(firedDuring).toBeGreaterThan(0);
  });
});
