import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, processOne, retryDelaySeconds } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("retries and failures ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const boom = () => {
    throw new Error("relay unreachable");
  };

  /** Seconds from the database's now to the job's run_at. */
  async function secondsUntilRun(id: number): Promise<number> {
    const job = await getJob(id, { db: t.db });
    return (job!.runAt.getTime() - (await t.now()).getTime()) / 1000;
  }

  it("backs off 10, 20, 40, 80, 160, 320, then 600 s (cap), then fails with last_error", async () => {
    const queue = "backoff";
    const id = await enqueue("flaky", { n: 1 }, { db: t.db, queue, maxAttempts: 9 });
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 8; attempt++) {
      expect(await processOne({ flaky: boom }, { db: t.db, queue })).toBe(true);
      const job = await getJob(id, { db: t.db });
      expect(job).toMatchObject({ status: "pending", attempts: attempt });
      expect(job!.lastError).toContain("relay unreachable");
      delays.push(Math.round(await secondsUntilRun(id)));
      // Not runnable before its time: a worker finds nothing to do.
      expect(await processOne({ flaky: boom }, { db: t.db, queue })).toBe(false);
      // Skip the wait by moving run_at to the database's now (instead of sleeping minutes).
      await t.sql("UPDATE {jobs} SET run_at = updated_at WHERE id = $1", [id]);
    }
    expect(delays).toEqual([10, 20, 40, 80, 160, 320, 600, 600]);
    expect(await processOne({ flaky: boom }, { db: t.db, queue })).toBe(true);
    const failed = await getJob(id, { db: t.db });
    expect(failed).toMatchObject({ status: "failed", attempts: 9, maxAttempts: 9 });
    expect(failed!.lastError).toContain("Error: relay unreachable");
  });

  it("the delay doubles from 10 s and stops growing at 600 s", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 50, 10_000].map(retryDelaySeconds)).toEqual([10, 20, 40, 80, 160, 320, 600, 600, 600, 600]);
  });

  it("defaults to maxAttempts 1: the first failure is final", async () => {
    const id = await enqueue("once", null, { db: t.db, queue: "default1" });
    expect((await getJob(id, { db: t.db }))!.maxAttempts).toBe(1);
    await processOne({ once: boom }, { db: t.db, queue: "default1" });
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "failed", attempts: 1 });
  });

  it("an error with retryable: false fails at once, attempts left or not", async () => {
    const id = await enqueue("bad", null, { db: t.db, queue: "perm", maxAttempts: 5 });
    await processOne(
      {
        bad: () => {
          throw Object.assign(new Error("550 unknown mailbox"), { retryable: false });
        },
      },
      { db: t.db, queue: "perm" },
    );
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "failed", attempts: 1 });
  });

  it("a job whose task has no handler fails with a message naming the task", async () => {
    const id = await enqueue("send_invoice", null, { db: t.db, queue: "nohandler", maxAttempts: 3 });
    await processOne({ other: () => undefined }, { db: t.db, queue: "nohandler" });
    const job = await getJob(id, { db: t.db });
    expect(job).toMatchObject({ status: "failed" });
    expect(job!.lastError).toContain('no handler for task "send_invoice"');
    expect(job!.lastError).toContain('"other"');
  });

  it("stores the handler's resolved value as the result, and refuses a result that is not JSON", async () => {
    const ok = await enqueue("ok", { x: 1 }, { db: t.db, queue: "results" });
    const bad = await enqueue("bad", null, { db: t.db, queue: "results", maxAttempts: 3 });
    const handlers = { ok: async (p: { x: number }) => ({ doubled: p.x * 2 }), bad: () => ({ n: 10n }) };
    while (await processOne(handlers, { db: t.db, queue: "results" }));
    expect(await getJob(ok, { db: t.db })).toMatchObject({ status: "done", result: { doubled: 2 } });
    const failed = await getJob(bad, { db: t.db });
    expect(failed).toMatchObject({ status: "failed", attempts: 1 });
    expect(failed!.lastError).toContain("result is not JSON");
  });
});
