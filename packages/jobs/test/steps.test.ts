import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, JobError, JobsDatabase, processOne, prune, pruneHistory, reclaim, retryJob, type JobContext } from "../src/index.js";
import { ensurePartitions } from "../src/maintenance/partitions.js";
import { JobAbortedError } from "../src/base/abort.js";
import type { Executor } from "../src/db/executor.js";
import { backends, deferred, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("durable steps: ctx.step ($name)", (backend) => {
  let t: TestDatabase;
  let items: string;
  let steps: string;
  beforeAll(async () => {
    t = await backend.create();
    items = t.tableName("step_items");
    steps = t.tableName("jobs_steps");
    await t.sql(`CREATE TABLE ${items} (n INTEGER PRIMARY KEY)`);
  });
  afterAll(() => t.close());

  async function savedSteps(id: number): Promise<{ name: string; result: string | null; attempt: number }[]> {
    const rows = await t.sql<{ name: string; result: string | null; attempt: number | string }>(
      `SELECT name, result, attempt FROM ${steps} WHERE job_id = $1 ORDER BY name`,
      [id],
    );
    return rows.map((r) => ({ name: r.name, result: r.result, attempt: Number(r.attempt) }));
  }

  async function itemNumbers(from: number, to: number): Promise<number[]> {
    const rows = await t.sql<{ n: number | string }>(`SELECT n FROM ${items} WHERE n >= $1 AND n <= $2 ORDER BY n`, [from, to]);
    return rows.map((r) => Number(r.n));
  }

  /** Makes a job that waits for a retry's backoff due now. */
  async function dueNow(id: number): Promise<void> {
    await t.sql(`UPDATE {jobs} SET run_at = updated_at WHERE id = $1`, [id]);
  }

  it("a step runs once: a retried job gets its saved result back without running it again", async () => {
    const q = "once";
    const id = await enqueue("flow", { n: 1 }, { db: t.db, queue: q, maxAttempts: 2 });
    const ran: string[] = [];
    const seen: unknown[] = [];
    const handler = async (_p: unknown, ctx: JobContext) => {
      const first = await ctx.step("first", () => {
        ran.push(`first@${ctx.job.attempt}`);
        return { at: new Date("2026-01-02T03:04:05.000Z"), list: [1, "two", null], nested: { b: 1, a: 2 } };
      });
      seen.push(first);
      if (ctx.job.attempt === 1) throw new Error("crash after step 1");
      const second = await ctx.step("second", () => {
        ran.push(`second@${ctx.job.attempt}`);
        return 42;
      });
      const nothing = await ctx.step("nothing", () => {
        ran.push(`nothing@${ctx.job.attempt}`);
      });
      return { first, second, nothing: nothing ?? "undefined" };
    };
    await processOne({ flow: handler }, { db: t.db, queue: q });
    expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
    await dueNow(id);
    await processOne({ flow: handler }, { db: t.db, queue: q });
    expect(ran).toEqual(["first@1", "second@2", "nothing@2"]);
    // The first run already got the saved JSON's value (a Date as its text), as a replay does.
    const expected = { at: "2026-01-02T03:04:05.000Z", list: [1, "two", null], nested: { b: 1, a: 2 } };
    expect(seen).toEqual([expected, expected]);
    const job = await getJob(id, { db: t.db });
    expect(job).toMatchObject({ status: "done", result: { first: expected, second: 42, nothing: "undefined" } });
    expect(await savedSteps(id)).toEqual([
      { name: "first", result: JSON.stringify(expected), attempt: 1 },
      { name: "nothing", result: null, attempt: 2 },
      { name: "second", result: "42", attempt: 2 },
    ]);
    // Key order survives storage: the replay hands back the very text the first run saved.
    expect(Object.keys((seen[1] as { nested: object }).nested)).toEqual(["b", "a"]);
  });

  it("a step with tx saves its result in the transaction of its writes: a failing write saves neither", async () => {
    const q = "tx";
    const id = await enqueue("writes", null, { db: t.db, queue: q, maxAttempts: 2 });
    let calls = 0;
    const handler = async (_p: unknown, ctx: JobContext) => {
      const created = await ctx.step("insert", async (tx) => {
        calls++;
        await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (1)`);
        if (ctx.job.attempt === 1) await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (1)`); // duplicate key
        return { created: 1 };
      });
      return created;
    };
    await processOne({ writes: handler }, { db: t.db, queue: q });
    expect((await getJob(id, { db: t.db }))!).toMatchObject({ status: "pending", attempts: 1 });
    expect(await itemNumbers(1, 1)).toEqual([]);
    expect(await savedSteps(id)).toEqual([]);
    await dueNow(id);
    await processOne({ writes: handler }, { db: t.db, queue: q });
    expect(calls).toBe(2);
    expect(await itemNumbers(1, 1)).toEqual([1]);
    expect(await savedSteps(id)).toEqual([{ name: "insert", result: '{"created":1}', attempt: 2 }]);
    expect((await getJob(id, { db: t.db }))!).toMatchObject({ status: "done", result: { created: 1 } });
  });

  it("refuses a duplicate name, a result that is not JSON and one over the result limit: clear errors, nothing saved, no retry", async () => {
    const q = "bad";
    const small = new JobsDatabase(t.db.executor, { ...t.db.settings, maxResultBytes: 64 });
    const errors: unknown[] = [];
    const attempt = async (what: () => Promise<unknown>) => {
      try {
        await what();
      } catch (error) {
        errors.push(error);
        throw error;
      }
    };
    const dup = await enqueue("dup", null, { db: t.db, queue: q, maxAttempts: 3 });
    const notJson = await enqueue("notJson", null, { db: t.db, queue: q, maxAttempts: 3 });
    const large = await enqueue("large", null, { db: t.db, queue: q, maxAttempts: 3 });
    const handlers = {
      dup: async (_p: unknown, ctx: JobContext) => {
        await ctx.step("same", () => 1);
        await attempt(() => ctx.step("same", () => 2));
      },
      notJson: (_p: unknown, ctx: JobContext) => attempt(() => ctx.step("big-int", () => ({ n: 10n }))),
      large: (_p: unknown, ctx: JobContext) => attempt(() => ctx.step("blob", () => "x".repeat(100))),
    };
    while (await processOne(handlers, { db: small, queue: q }));
    expect(errors).toHaveLength(3);
    for (const error of errors) expect(error).toBeInstanceOf(JobError);
    expect((errors[0] as Error).message).toMatch(/ctx\.step\("same"\): a step of this name already ran in this run/);
    expect((errors[1] as Error).message).toMatch(/ctx\.step\("big-int"\) result.*BigInt|bigint/i);
    expect((errors[2] as Error).message).toMatch(/ctx\.step\("blob"\): its result of 102 bytes is over the 64-byte limit \(maxResultBytes\)/);
    for (const id of [dup, notJson, large]) expect((await getJob(id, { db: t.db }))!).toMatchObject({ status: "failed", attempts: 1 });
    expect(await savedSteps(dup)).toEqual([{ name: "same", result: "1", attempt: 1 }]);
    expect(await savedSteps(notJson)).toEqual([]);
    expect(await savedSteps(large)).toEqual([]);
  });

  it("refuses the step of a run whose job was taken over: nothing saved, its tx writes rolled back, its signal fired", async () => {
    const q = "stale";
    const id = await enqueue("stale", null, { db: t.db, queue: q, maxAttempts: 2 });
    const started = deferred<JobContext>();
    const release = deferred();
    const run = processOne(
      {
        stale: async (_p: unknown, ctx: JobContext) => {
          started.resolve(ctx);
          await release.promise;
        },
      },
      { db: t.db, queue: q, lease: 60 },
    );
    const ctx = await started.promise;
    expect(await ctx.step("before", () => "kept")).toBe("kept");
    await reclaim({ db: t.db, lease: 0, queue: q });
    let ran = false;
    const refused = await ctx
      .step("after", async (tx) => {
        ran = true;
        await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (500)`);
        return "lost";
      })
      .catch((e: unknown) => e);
    expect(ran).toBe(true);
    expect(refused).toBeInstanceOf(JobAbortedError);
    expect((refused as Error).message).toMatch(/ctx\.step\("after"\): job \d+ was taken over or cancelled; this run no longer owns it, so nothing was saved/);
    expect(ctx.signal.aborted).toBe(true);
    // Once the run knows it lost the job, a step's function is not even called.
    let called = false;
    await expect(ctx.step("later", () => (called = true))).rejects.toThrow(JobAbortedError);
    expect(called).toBe(false);
    release.resolve();
    await run;
    expect(await itemNumbers(500, 500)).toEqual([]);
    expect(await savedSteps(id)).toEqual([{ name: "before", result: '"kept"', attempt: 1 }]);
  });

  it("a job's steps stay while the job is kept (a retried failed job answers them) and go when prune deletes it", async () => {
    const q = "kept";
    const id = await enqueue("once", null, { db: t.db, queue: q });
    let runs = 0;
    const handlers = {
      once: async (_p: unknown, ctx: JobContext) => {
        await ctx.step("counted", () => ++runs);
        if (ctx.job.attempt === 1 && runs === 1) throw Object.assign(new Error("fails for good"), { retryable: false });
      },
    };
    await processOne(handlers, { db: t.db, queue: q });
    expect((await getJob(id, { db: t.db }))!.status).toBe("failed");
    expect(await retryJob(id, { db: t.db })).toBeTruthy();
    expect(await savedSteps(id)).toEqual([{ name: "counted", result: "1", attempt: 1 }]);
    await processOne(handlers, { db: t.db, queue: q });
    expect(runs).toBe(1);
    expect((await getJob(id, { db: t.db }))!.status).toBe("done");
    const other = await enqueue("once", null, { db: t.db, queue: "kept-other" });
    await processOne(handlers, { db: t.db, queue: "kept-other" });
    expect(await savedSteps(other)).toHaveLength(1);
    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus("120", "-")} WHERE id = $1`, [id]);
    expect(await prune({ db: t.db, olderThan: 60 })).toBeGreaterThanOrEqual(1);
    expect(await getJob(id, { db: t.db })).toBeNull();
    expect(await savedSteps(id)).toEqual([]);
    // A job that prune kept keeps its steps.
    expect(await savedSteps(other)).toHaveLength(1);
  });
  it("pruneHistory's dropped day takes its jobs' steps with it (PostgreSQL: a DROP fires no trigger)", async () => {
    if (backend.name !== "postgres") return; // day partitions are PostgreSQL's
    const handlers = { day: (_p: unknown, ctx: JobContext) => ctx.step("only", () => "saved") };
    const old = await enqueue("day", null, { db: t.db, queue: "day-old" });
    const recent = await enqueue("day", null, { db: t.db, queue: "day-recent" });
    await processOne(handlers, { db: t.db, queue: "day-old" });
    await processOne(handlers, { db: t.db, queue: "day-recent" });
    await ensurePartitions(t.db, ["2026-03-01"]);
    // Moved to an old day's partition: an UPDATE fires no DELETE statement trigger, the steps stay.
    await t.sql(`UPDATE {history} SET finished_at = '2026-03-01T12:00:00Z' WHERE id = $1`, [old]);
    expect(await savedSteps(old)).toHaveLength(1);
    const [{ age }] = (await t.sql<{ age: number }>(`SELECT extract(epoch FROM now() - '2026-03-02T00:00:00Z'::timestamptz)::float8 AS age`)) as [
      { age: number },
    ];
    expect(await pruneHistory({ db: t.db, olderThan: Math.floor(age) })).toContain("2026-03-01");
    expect(await getJob(old, { db: t.db })).toBeNull();
    expect(await savedSteps(old)).toEqual([]);
    expect(await savedSteps(recent)).toHaveLength(1);
  });
  it("a failed read of the saved steps is not kept: the run's next step reads them again", async () => {
    const real = t.db.executor;
    let failures = 1;
    const flaky: Executor = Object.create(real, {
      forWorker: { value: undefined },
      query: {
        value: ((sql: string, ...rest: unknown[]) => {
          if (sql.includes("SELECT name, kind, result") && failures-- > 0) return Promise.reject(new Error("connection lost (test)"));
          return (real.query as (...a: unknown[]) => unknown)(sql, ...rest);
        }) as Executor["query"],
      },
    });
    const db = new JobsDatabase(flaky, t.db.settings);
    const id = await enqueue("flaky", null, { db: t.db, queue: "flaky-read" });
    const outcomes: unknown[] = [];
    await processOne(
      {
        flaky: async (_p: unknown, ctx: JobContext) => {
          outcomes.push(await ctx.step("first", () => 1).catch((e: unknown) => (e as Error).message));
          outcomes.push(await ctx.step("second", () => 2));
        },
      },
      { db, queue: "flaky-read" },
    );
    expect(outcomes).toEqual(["connection lost (test)", 2]);
    expect(await savedSteps(id)).toEqual([{ name: "second", result: "2", attempt: 1 }]);
  });
});
