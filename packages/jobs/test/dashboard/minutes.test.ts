// Issue 17.4: the dashboard's chart reads per-minute counts kept by triggers (jobs_minutes,
// migration 10), not every job of the last hour. The counts are checked against a count of the
// table itself after every kind of write that moves a job into, out of, or across a minute.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, processOne, prune, retryJob } from "../../src/index.js";
import { recentActivity, CHART_MINUTES } from "../../src/dashboard/queries.js";
import { MINUTE_HORIZON, MINUTE_SLOTS } from "../../src/migrations/types.js";
import { endingSelect, STORED_LIST } from "../../src/run/ended.js";
import { backends, type TestDatabase } from "../helpers/backends.js";

const MINUTE_SQL = {
  postgres: (column: string) => `floor(extract(epoch from ${column}) / 60)::bigint`,
  sqlite: (column: string) => `(${column} / 60000)`,
  mysql: (column: string) => `TIMESTAMPDIFF(MINUTE, TIMESTAMP'1970-01-01 00:00:00', ${column})`,
} as const;

describe.each(backends())("the chart's per-minute counts ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());
  const minuteOf = MINUTE_SQL[backend.name];

  /** Per minute, done and failed jobs of `queue` that ended in the chart's window, counted over the table: the reference. */
  async function truth(queue: string): Promise<Map<number, { done: number; failed: number }>> {
    const rows = await t.sql<{ minute: number | string; status: "done" | "failed"; n: number | string }>(
      `SELECT ${minuteOf("finished_at")} AS minute, status, count(*) AS n FROM {all}
       WHERE queue = $1 AND status IN ('done', 'failed') AND ${minuteOf("finished_at")} > ${minuteOf(t.db.sql.now)} - ${CHART_MINUTES}
       GROUP BY ${minuteOf("finished_at")}, status`,
      [queue],
    );
    const byMinute = new Map<number, { done: number; failed: number }>();
    for (const row of rows) {
      const entry = byMinute.get(Number(row.minute)) ?? { done: 0, failed: 0 };
      entry[row.status] += Number(row.n);
      byMinute.set(Number(row.minute), entry);
    }
    return byMinute;
  }

  /** What the chart shows for `queue`, per minute with anything in it. */
  async function charted(queue: string): Promise<Map<number, { done: number; failed: number }>> {
    const activity = await recentActivity(t.db);
    const series = activity.throughput.get(queue);
    const byMinute = new Map<number, { done: number; failed: number }>();
    if (!series) return byMinute;
    for (let slot = 0; slot < CHART_MINUTES; slot++) {
      const done = series.done[slot]!;
      const failed = series.failed[slot]!;
      if (done !== 0 || failed !== 0) byMinute.set(activity.nowMinute - (CHART_MINUTES - 1 - slot), { done, failed });
    }
    return byMinute;
  }

  async function expectExact(queue: string, total: { done: number; failed: number }): Promise<void> {
    const reference = await truth(queue);
    const sum = [...reference.values()].reduce((a, b) => ({ done: a.done + b.done, failed: a.failed + b.failed }), { done: 0, failed: 0 });
    expect(sum).toEqual(total);
    expect(await charted(queue)).toEqual(reference);
  }

  const handlers = {
    ok: () => "fine",
    bad: () => {
      throw new Error("no");
    },
  };

  it("stay exact through completion, failure, retry, an operator's backdating and deletes, and prune", async () => {
    const q = "minutes-exact";
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push(await enqueue(i < 4 ? "ok" : "bad", null, { db: t.db, queue: q }));
    for (let i = 0; i < 6; i++) await processOne(handlers, { db: t.db, queue: q });
    await expectExact(q, { done: 4, failed: 2 });

    // A failed job retried leaves its minute; done again, it counts in the minute it ended.
    expect(await retryJob(ids[4]!, { db: t.db })).toBe(true);
    await expectExact(q, { done: 4, failed: 1 });

    // Backdated by an operator: ten minutes ago moves it; past the horizon takes it out of the chart.
    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus("600", "-")} WHERE id = $1`, [ids[0]]);
    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus(String(MINUTE_HORIZON * 60 + 600), "-")} WHERE id = $1`, [ids[1]]);
    await expectExact(q, { done: 3, failed: 1 });

    // Deleted: a recent job leaves its minute; pruning the old one changes nothing.
    await t.sql("DELETE FROM {history} WHERE id = $1", [ids[2]]);
    await expectExact(q, { done: 2, failed: 1 });
    expect(await prune({ db: t.db, olderThan: MINUTE_HORIZON * 60 })).toBe(1);
    await expectExact(q, { done: 2, failed: 1 });

    // Inserted already ended (an import of history, say): a row of history's columns, made from a job's.
    const imported = await enqueue("ok", null, { db: t.db, queue: q });
    const now = t.db.sql.now;
    await t.sql(
      `INSERT INTO {history} (${STORED_LIST}) SELECT ${endingSelect("j", { status: "'done'", attempts: "1", started_at: now, finished_at: now })} FROM {jobs} j WHERE j.id = $1`,
      [imported],
    );
    await t.sql("DELETE FROM {jobs} WHERE id = $1", [imported]);
    await expectExact(q, { done: 3, failed: 1 });
  });

  it("a slot written for a later minute starts again from zero: the ring holds no count of two hours ago", async () => {
    const q = "minutes-ring";
    const [now] = await t.sql<{ minute: number | string }>(`SELECT ${minuteOf(t.db.sql.now)} AS minute`);
    const minute = Number(now!.minute);
    // What the slot of this minute held MINUTE_SLOTS minutes ago, on every shard a connection can write.
    for (let shard = -1; shard < 16; shard++) {
      for (const m of [minute, minute + 1]) {
        await t.sql(`INSERT INTO ${t.db.minutesTable} (slot, queue, status, shard, minute, n) VALUES ($1, $2, 'done', $3, $4, 50)`, [
          (m - MINUTE_SLOTS) % MINUTE_SLOTS,
          q,
          shard,
          m - MINUTE_SLOTS,
        ]);
      }
    }
    expect(await charted(q)).toEqual(new Map());
    for (let i = 0; i < 3; i++) await enqueue("ok", null, { db: t.db, queue: q });
    for (let i = 0; i < 3; i++) await processOne(handlers, { db: t.db, queue: q });
    await expectExact(q, { done: 3, failed: 0 });
    const [kept] = await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM ${t.db.minutesTable} WHERE queue = $1`, [q]);
    expect(Number(kept!.n)).toBe(2 * 17);
  });

  it("lose no increment when completions run concurrently on several connections, spread over shards", async () => {
    const q = "minutes-concurrent";
    const total = 120;
    for (let i = 0; i < total; i++) await enqueue(i % 10 === 0 ? "bad" : "ok", { i }, { db: t.db, queue: q });
    const loop = async () => {
      while (await processOne(handlers, { db: t.db, queue: q }));
    };
    await Promise.all(Array.from({ length: 6 }, loop));
    await expectExact(q, { done: 108, failed: 12 });
    if (backend.name !== "sqlite") {
      const [shards] = await t.sql<{ n: number | string }>(`SELECT count(DISTINCT shard) AS n FROM ${t.db.minutesTable} WHERE queue = $1`, [q]);
      expect(Number(shards!.n)).toBeGreaterThan(1);
    }
  });

  it("the wait sample reads only the latest `sample` ended jobs: a queue that ended nothing since has no figure", async () => {
    const own = await backend.create();
    try {
      await enqueue("ok", null, { db: own.db, queue: "early-q" });
      await processOne(handlers, { db: own.db, queue: "early-q" });
      for (let i = 0; i < 5; i++) await enqueue("ok", null, { db: own.db, queue: "late-q" });
      for (let i = 0; i < 5; i++) await processOne(handlers, { db: own.db, queue: "late-q" });
      const bounded = await recentActivity(own.db, 4);
      expect(bounded.waits.get("late-q")?.sample).toBe(4);
      expect(bounded.waits.has("early-q")).toBe(false);
      // Its job still counts in the chart, and a larger sample reaches it.
      expect(bounded.throughput.get("early-q")?.done.reduce((a, b) => a + b, 0)).toBe(1);
      expect((await recentActivity(own.db, 6)).waits.get("early-q")?.sample).toBe(1);
    } finally {
      await own.close();
    }
  });

  it("the chart does not read the jobs table: a count planted in jobs_minutes is what it shows", async () => {
    const q = `minutes-planted-${randomUUID().slice(0, 8)}`;
    const [now] = await t.sql<{ minute: number | string }>(`SELECT ${minuteOf(t.db.sql.now)} AS minute`);
    const minute = Number(now!.minute) - 3;
    await t.sql(`INSERT INTO ${t.db.minutesTable} (slot, queue, status, shard, minute, n) VALUES ($1, $2, 'failed', 0, $3, 7)`, [
      minute % MINUTE_SLOTS,
      q,
      minute,
    ]);
    expect(await charted(q)).toEqual(new Map([[minute, { done: 0, failed: 7 }]]));
  });
});
