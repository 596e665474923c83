import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { drain, enqueue, enqueueMany, JobsDatabase, processOne, snooze, statusCounts, type Handlers } from "../src/index.js";
import type { Executor } from "../src/db/executor.js";
import { backends, uniqueName, type TestDatabase } from "./helpers/backends.js";

const due = (value: unknown) => Number(value) === 1 || value === true;

describe.each(backends())("the due flag: scheduled jobs kept out of the claim index ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const dueOf = async (id: number) => due((await t.sql<{ due: unknown }>(`SELECT due FROM {jobs} WHERE id = $1`, [id]))[0]?.due);

  it("an enqueue writes due for a job ready now or with a group or a key, not due for a plain delayed one", async () => {
    const queue = uniqueName("q");
    const now = await enqueue("t", {}, { db: t.db, queue });
    const later = await enqueue("t", {}, { db: t.db, queue, availableIn: 3600 });
    const grouped = await enqueue("t", {}, { db: t.db, queue, availableIn: 3600, group: "g" });
    const keyed = await enqueue("t", {}, { db: t.db, queue, availableIn: 3600, concurrencyKey: "k" });
    expect([await dueOf(now), await dueOf(later), await dueOf(grouped), await dueOf(keyed)]).toEqual([true, false, true, true]);
  });

  it("a retry's backoff and a snooze write not due; a snoozed job is claimed once its time has come", async () => {
    const queue = uniqueName("q");
    const retried = await enqueue("fails", {}, { db: t.db, queue, maxAttempts: 2 });
    const snoozed = await enqueue("snoozes", {}, { db: t.db, queue, priority: -1 });
    let snoozes = 0;
    const handlers: Handlers = {
      fails: () => {
        throw new Error("again later");
      },
      snoozes: () => {
        snoozes += 1;
        if (snoozes === 1) throw snooze(1);
      },
    };
    expect(await drain(handlers, { db: t.db, queue })).toBe(2);
    expect(await dueOf(retried)).toBe(false);
    expect(await dueOf(snoozed)).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 1300));
    // processOne promotes before it claims.
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(snoozes).toBe(2);
  });

  it("a job left not due past its time is promoted and claimed (the flag is a hint, never a loss)", async () => {
    const queue = uniqueName("q");
    const id = await enqueue("t", {}, { db: t.db, queue });
    await t.sql(`UPDATE {jobs} SET due = ${backend.name === "postgres" ? "false" : "0"} WHERE id = $1`, [id]);
    let ran = 0;
    expect(await processOne({ t: () => void (ran += 1) }, { db: t.db, queue })).toBe(true);
    expect(ran).toBe(1);
  });

  it("counts and lists still see scheduled jobs as pending", async () => {
    const queue = uniqueName("q");
    await enqueue("t", {}, { db: t.db, queue });
    await enqueue("t", {}, { db: t.db, queue, availableIn: 3600 });
    const [status] = await statusCounts({ db: t.db, queue });
    expect(status?.counts.pending).toBe(2);
    expect(status?.ready).toBe(1);
  });
});

describe.each(backends().filter((b) => b.name === "postgres"))("the due flag: the claim's walk ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** Every "Rows Removed by Filter" of a JSON plan, summed: the rows an index walk read and dropped. */
  const removed = (node: Record<string, unknown>): number =>
    Number(node["Rows Removed by Filter"] ?? 0) + ((node.Plans as Record<string, unknown>[] | undefined) ?? []).reduce((n, p) => n + removed(p), 0);

  it("passes over no job due later: 2,000 scheduled jobs of higher priority ahead of the one ready job cost the claim nothing", async () => {
    const queue = uniqueName("q");
    await enqueueMany(
      Array.from({ length: 2000 }, () => ({ task: "t", payload: {}, queue, availableIn: 3600, priority: 10 })),
      { db: t.db },
    );
    await enqueue("t", {}, { db: t.db, queue });
    const claims: { sql: string; params: unknown[] }[] = [];
    const inner = t.db.executor;
    const spy: Executor = Object.create(inner, {
      query: {
        value: (sql: string, params: unknown[] = [], name?: string) => (name === "claim" && claims.push({ sql, params }), inner.query(sql, params, name)),
      },
    }) as Executor;
    let ran = 0;
    expect(await processOne({ t: () => void (ran += 1) }, { db: new JobsDatabase(spy, t.db.settings), queue })).toBe(true);
    expect(ran).toBe(1);
    const claim = claims[0]!;
    await enqueue("t", {}, { db: t.db, queue });
    const plan = await t.withTransaction(
      async (bound) =>
        (await bound.executor.query<{ "QUERY PLAN": [{ Plan: Record<string, unknown> }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${claim.sql}`, claim.params)).rows,
      "rollback",
    );
    expect(removed(plan[0]!["QUERY PLAN"][0].Plan)).toBeLessThan(10);
  });
});
