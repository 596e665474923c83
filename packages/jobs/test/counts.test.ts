// Issue 17.4: statusCounts reads finished jobs from counts kept by triggers (migration 7; on the
// history table since migration 15, issue 33), and prune deletes in bounded batches. The counts
// are checked against a count of both tables after every kind of write that moves a job into or
// out of a finished state, legacy ended rows of the live table included (counted once, by
// migration 15; whatever takes one away uncounts it).
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, JobError, JobsDatabase, processOne, prune, pruneHistory, reclaim, retryJob, statusCounts } from "../src/index.js";
import type { Executor } from "../src/db/executor.js";
import { moveEnded } from "../src/run/ended.js";
import { ensureDays, ensurePartitions } from "../src/maintenance/history.js";
import { backends, type TestDatabase } from "./helpers/backends.js";
import { makeLegacy } from "./helpers/legacy-rows.js";

type Counts = { pending: number; running: number; done: number; failed: number; cancelled: number; waiting: number };

describe.each(backends())("finished-job counts and batched prune ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** What a count over the table says, the reference the kept counts must match. */
  async function truth(queue: string, tenant?: string): Promise<Counts> {
    const rows = await t.sql<{ status: keyof Counts; n: number | string }>(
      `SELECT status, count(*) AS n FROM {all} WHERE queue = $1${tenant ? " AND tenant = $2" : ""} GROUP BY status`,
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

    // An operator's own SQL counts too: the triggers see every write of the ended jobs.
    await t.sql("UPDATE {history} SET queue = 'elsewhere' WHERE id = $1", [ids[0]]);
    await expectExact(q, { done: 2 });
    await expectExact("elsewhere", { done: 1 });

    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus("7200", "-")} WHERE queue = $1 AND status IN ('done', 'failed')`, [q]);
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
    // 25 old, 5 recent; two of the old ones failed, one is back to pending (failed, then retried).
    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus("7200", "-")} WHERE queue = $1 AND id <= $2`, [q, ids[24]]);
    await t.sql("UPDATE {history} SET status = 'failed' WHERE id IN ($1, $2, $3)", [ids[0], ids[1], ids[2]]);
    expect(await retryJob(ids[2]!, { db: t.db })).toBe(true);
    for (const batchSize of [0, 1.5, 100_001, "10"]) {
      await expect(prune({ db: t.db, olderThan: 3600, batchSize: batchSize as number })).rejects.toThrow(JobError);
    }
    expect((await truth(q)).done).toBe(27);

    const deletes: string[] = [];
    const inner = t.db.executor;
    const spy: Executor = Object.create(inner, {
      // The jobs' deletes only (after them, prune also drops the dependency edges, the recorded
      // earlier attempts of pruned jobs, and old events with the waits of jobs no longer live; before
      // them, the debounce keys of ended jobs).
      query: {
        value: (sql: string, params?: unknown[], name?: string) => (
          /^\s*DELETE/.test(sql) && !/^\s*DELETE FROM \S*jobs_(dependencies|attempts|events|waits|debounce)/.test(sql) && deletes.push(sql),
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
    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus("7200", "-")} WHERE queue = $1`, [q]);
    let fired = 0;
    const timer = setInterval(() => fired++, 0);
    const deleted = await prune({ db: t.db, olderThan: 3600, batchSize: 2 });
    const firedDuring = fired;
    clearInterval(timer);
    expect(deleted).toBe(20);
    expect(firedDuring).toBeGreaterThan(0);
  });

  /**
   * The chart's counts (jobs_minutes) of `queue`, per status, against a count of both tables: for
   * a queue whose jobs all ended within the last hour (per minute: test/dashboard/minutes.test.ts).
   */
  async function expectMinutesExact(queue: string): Promise<void> {
    const sums = async (sql: string) =>
      Object.fromEntries((await t.sql<{ status: string; n: number | string }>(sql, [queue])).map((r) => [r.status, Number(r.n)]).filter(([, n]) => n !== 0));
    expect(await sums(`SELECT status, SUM(n) AS n FROM ${t.db.minutesTable} WHERE queue = $1 GROUP BY status`)).toEqual(
      await sums(`SELECT status, count(*) AS n FROM {all} WHERE queue = $1 AND status IN ('done', 'failed') GROUP BY status`),
    );
  }

  it("stay exact through retry, move into history and prune of legacy ended rows of the live table, and of history rows beside them", async () => {
    const q = "legacy";
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) ids.push(await enqueue(i % 3 === 2 ? "bad" : "ok", null, { db: t.db, queue: q, ...(i % 2 ? { tenant: "acme" } : {}) }));
    const handlers = {
      ok: () => "fine",
      bad: () => {
        throw new Error("no");
      },
    };
    for (let i = 0; i < 10; i++) await processOne(handlers, { db: t.db, queue: q });
    expect(await cancelJob(ids[10]!, { db: t.db })).toBe(true);
    // Backdated first (within the chart's hour): as legacy rows, no trigger follows them any more.
    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus("1200", "-")} WHERE queue = $1`, [q]);
    await makeLegacy(t, ids.slice(0, 6));
    expect((await t.sql(`SELECT id FROM {jobs} WHERE queue = $1 AND status <> 'pending'`, [q])).length).toBe(6);
    await expectExact(q, { done: 7, failed: 3, cancelled: 1, pending: 1 });
    await expectMinutesExact(q);

    // Retried: a legacy row where it is, a history row back into the live table.
    expect(await retryJob(ids[2]!, { db: t.db })).toBe(true);
    expect(await retryJob(ids[8]!, { db: t.db })).toBe(true);
    expect(await retryJob(ids[8]!, { db: t.db })).toBe(false);
    await expectExact(q, { done: 7, failed: 1, cancelled: 1, pending: 3 });
    await expectMinutesExact(q);
    expect(await processOne({ bad: () => "fixed", ok: () => "fine" }, { db: t.db, queue: q })).toBe(true);
    await expectExact(q, { done: 8, failed: 1, cancelled: 1, pending: 2 });
    await expectMinutesExact(q);

    // Moved into history: counted once still. Then deleted, from both tables.
    expect(await prune({ db: t.db, olderThan: 600, into: "history", statuses: ["done"], batchSize: 2 })).toBe(4);
    await expectExact(q, { done: 8, failed: 1, cancelled: 1, pending: 2 });
    await expectMinutesExact(q);
    expect((await t.sql(`SELECT id FROM {jobs} WHERE queue = $1 AND status <> 'pending'`, [q])).length).toBe(1);
    await makeLegacy(t, [ids[1]!, ids[7]!]);
    expect(await prune({ db: t.db, olderThan: 600, batchSize: 2 })).toBe(9);
    await expectExact(q, { done: 1, failed: 0, cancelled: 0, pending: 2 });
    await expectMinutesExact(q);
    expect((await t.sql(`SELECT id FROM {jobs} WHERE queue = $1 AND status <> 'pending'`, [q])).length).toBe(0);
  });

  it.runIf(backend.name === "postgres")("stay exact when pruneHistory drops a day of history (a DROP fires no trigger)", async () => {
    const q = "dropped";
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push(await enqueue(i === 4 ? "bad" : "ok", null, { db: t.db, queue: q, ...(i % 2 ? { tenant: "acme" } : {}) }));
    const handlers = {
      ok: () => "fine",
      bad: () => {
        throw new Error("no");
      },
    };
    for (let i = 0; i < 5; i++) await processOne(handlers, { db: t.db, queue: q });
    await ensurePartitions(t.db, ["2026-01-10"]);
    await t.sql(`UPDATE {history} SET finished_at = '2026-01-10T12:00:00Z' WHERE id IN ($1, $2, $3)`, [ids[0], ids[1], ids[4]]);
    await expectExact(q, { done: 4, failed: 1 });
    const [{ age }] = (await t.sql<{ age: number }>(`SELECT extract(epoch FROM now() - '2026-01-11T00:00:00Z'::timestamptz)::float8 AS age`)) as [
      { age: number },
    ];
    expect(await pruneHistory({ db: t.db, olderThan: Math.floor(age) })).toContain("2026-01-10");
    await expectExact(q, { done: 2, failed: 0 });
  });

  it("the live table has no counting trigger: claims, starts and lease extensions pay none; the history table counts", async () => {
    const triggersOn = async (table: "jobs" | "jobs_history"): Promise<string[]> => {
      const sql = {
        postgres: `SELECT tgname AS name FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal`,
        sqlite: `SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = $1`,
        mysql: `SELECT TRIGGER_NAME AS name FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = $1 AND EVENT_OBJECT_TABLE = $2`,
      }[backend.name];
      const params = { postgres: [table === "jobs" ? t.db.table : t.db.historyTable], sqlite: [table], mysql: [t.schema, table] }[backend.name];
      return (await t.sql<{ name: string }>(sql, params)).map((r) => r.name).sort();
    };
    expect(await triggersOn("jobs")).toEqual([]);
    const expected = {
      postgres: ["insert", "delete", "update", "truncate"],
      sqlite: ["insert", "delete", "update_old", "update_new"],
      mysql: ["insert", "delete", "update"],
    }[backend.name];
    // Beside the counting triggers, ones that count nothing: a pruned job's durable steps (migration 18) and live
    // progress (migration 23) go with it; on PostgreSQL an awaited job's arrival notifies its waiters (migration 23).
    const others = ["jobs_steps_gone", "jobs_progress_gone", ...(backend.name === "postgres" ? ["jobs_awaited_ended"] : [])];
    expect(await triggersOn("jobs_history")).toEqual([...["jobs_count", "jobs_minute"].flatMap((p) => expected.map((op) => `${p}_${op}`)), ...others].sort());
  });

  it.runIf(backend.name === "postgres")(
    "ending a batch of jobs writes no counter row on the live table and one per queue and status as they move, not one per job",
    async () => {
      const q = "per-statement";
      const ids: number[] = [];
      for (let i = 0; i < 100; i++) ids.push(await enqueue("ok", null, { db: t.db, queue: q }));
      await ensureDays(t.db, -1, 1);
      const written = await t.db.executor.transaction(async (tx) => {
        const versions = async () =>
          Number(
            (await tx.query<{ n: string }>(`SELECT n_tup_ins + n_tup_upd AS n FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`, [t.db.countsTable]))
              .rows[0]?.n ?? 0,
          );
        const before = await versions();
        // What a batch completion does: one UPDATE of the live rows, one move into history.
        await tx.query(`UPDATE ${t.db.table} SET status = 'done', finished_at = now() WHERE queue = $1`, [q]);
        const ended = await versions();
        await moveEnded(t.db, tx, ids);
        return [ended - before, (await versions()) - ended];
      });
      expect(written).toEqual([0, 1]);
      await expectExact(q, { done: 100, pending: 0 });
    },
  );
});
