// Batches (issue 19): enqueueBatch, a callback released exactly once when every item ended
// (done, failed, cancelled), ctx.batch(), including two last items finishing at once. All backends.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cancelJob,
  drain,
  enqueue,
  enqueueBatch,
  getJob,
  JobError,
  processOne,
  reclaim,
  statusCounts,
  type BatchSummary,
  type JobContext,
} from "../src/index.js";
import { backends, deferred, type TestDatabase } from "./helpers/backends.js";

const permanent = (message: string) => Object.assign(new Error(message), { retryable: false });

describe.each(backends())("batches ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const status = async (id: number) => (await getJob(id, { db: t.db }))?.status;

  it("the callback waits, then runs once with the counts and the failed ids", async () => {
    const queue = "counts";
    const { batchId, ids, callbackId } = await enqueueBatch(
      [
        { task: "send", payload: { to: "a" } },
        { task: "send", payload: { to: "bounce" } },
        { task: "send", payload: { to: "c" } },
      ],
      { db: t.db, queue, onComplete: { task: "campaign.sent", payload: { campaign: 7 } } },
    );
    expect(ids).toHaveLength(3);
    expect(await getJob(callbackId as number, { db: t.db })).toMatchObject({ status: "waiting", payload: { campaign: 7 } });
    expect(await getJob(ids[0] as number, { db: t.db })).toMatchObject({ batchId });
    expect((await statusCounts({ db: t.db, queue }))[0]?.counts).toMatchObject({ pending: 3, waiting: 1 });
    const seen: (BatchSummary | null)[] = [];
    const handlers = {
      send: (p: { to: string }) => {
        if (p.to === "bounce") throw permanent("550 no such user");
        return "sent";
      },
      "campaign.sent": async (_p: unknown, ctx: JobContext) => void seen.push(await ctx.batch()),
    };
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(await status(callbackId as number)).toBe("waiting");
    expect(await drain(handlers, { db: t.db, queue })).toBe(2);
    expect(seen).toEqual([{ batchId, done: 2, failed: 1, cancelled: 0, failedIds: [ids[1]] }]);
    expect(await status(callbackId as number)).toBe("done");
  });

  it("cancelled items count as ended; a job that is not a callback reads ctx.batch() as null", async () => {
    const queue = "cancel";
    const { ids, callbackId } = await enqueueBatch([{ task: "item" }, { task: "item" }], { db: t.db, queue, onComplete: { task: "done" } });
    const seen: (BatchSummary | null)[] = [];
    const handlers = {
      item: async (_p: unknown, ctx: JobContext) => void seen.push(await ctx.batch()),
      done: async (_p: unknown, ctx: JobContext) => void seen.push(await ctx.batch()),
    };
    await processOne(handlers, { db: t.db, queue });
    expect(await cancelJob(ids[1] as number, { db: t.db })).toBe(true);
    expect(await status(callbackId as number)).toBe("pending");
    await drain(handlers, { db: t.db, queue });
    expect(seen).toEqual([null, expect.objectContaining({ done: 1, failed: 0, cancelled: 1, failedIds: [] })]);
  });

  it("a reclaim that fails the last item releases the callback; an empty batch's callback is pending at once", async () => {
    const queue = "reclaim";
    const { ids, callbackId } = await enqueueBatch([{ task: "item" }], { db: t.db, queue, onComplete: { task: "done" } });
    await t.sql(
      `UPDATE {jobs} SET status = 'running', attempts = 1, started_at = updated_at, heartbeat_at = updated_at, locked_until = updated_at,
       claim_token = '00000000-0000-4000-8000-000000000002' WHERE id = $1`,
      [ids[0]],
    );
    expect((await reclaim({ db: t.db, lease: 0, queue })).map((r) => r.status)).toEqual(["failed"]);
    expect(await status(callbackId as number)).toBe("pending");
    const empty = await enqueueBatch([], { db: t.db, queue: "empty", onComplete: { task: "done" } });
    expect(empty.ids).toEqual([]);
    expect(await status(empty.callbackId as number)).toBe("pending");
    expect((await enqueueBatch([{ task: "x" }], { db: t.db, queue: "none" })).callbackId).toBeNull();
  });

  it("exactly once when the last two items finish at the same instant on two connections", async () => {
    for (let round = 0; round < 8; round++) {
      const queue = `race-${round}`;
      const { callbackId } = await enqueueBatch([{ task: "item" }, { task: "item" }], { db: t.db, queue, onComplete: { task: "done" } });
      const both = deferred();
      let started = 0;
      const handlers = {
        item: async () => {
          if (++started === 2) both.resolve();
          await both.promise;
        },
      };
      const [a, b] = await Promise.all([processOne(handlers, { db: t.db, queue }), processOne(handlers, { db: t.db, queue })]);
      expect([a, b]).toEqual([true, true]);
      expect(await status(callbackId as number)).toBe("pending");
      let runs = 0;
      expect(await drain({ done: () => void runs++ }, { db: t.db, queue })).toBe(1);
      expect(runs).toBe(1);
    }
  });

  it("ctx.batch() counts only its own tenant: two tenants' twin batches, and an item planted across tenants, never cross", async () => {
    const queue = "tenants";
    const items = [
      { task: "send", payload: { to: "a" } },
      { task: "send", payload: { to: "bounce" } },
    ];
    const a = await enqueueBatch(items, { db: t.db, queue, tenant: "org-a", onComplete: { task: "sent" } });
    const b = await enqueueBatch([...items, { task: "send", payload: { to: "bounce" } }], { db: t.db, queue, tenant: "org-b", onComplete: { task: "sent" } });
    // enqueueBatch refuses an item of another tenant, so the read's own tenant condition can
    // only be reached by a row written behind the API's back: org-b's failed job in org-a's batch.
    const stray = await enqueue("send", null, { db: t.db, queue: "stray", tenant: "org-b" });
    await t.sql(`UPDATE {jobs} SET status = 'failed', batch_id = $1 WHERE id = $2`, [a.batchId, stray]);
    const seen = new Map<number, BatchSummary | null>();
    const handlers = {
      send: (p: { to: string }) => {
        if (p.to === "bounce") throw permanent("550 no such user");
      },
      sent: async (_p: unknown, ctx: JobContext) => void seen.set(ctx.job.id, await ctx.batch()),
    };
    expect(await drain(handlers, { db: t.db, queue })).toBe(7);
    expect(seen.get(a.callbackId as number)).toEqual({ batchId: a.batchId, done: 1, failed: 1, cancelled: 0, failedIds: [a.ids[1]] });
    expect(seen.get(b.callbackId as number)).toEqual({ batchId: b.batchId, done: 1, failed: 2, cancelled: 0, failedIds: [b.ids[1], b.ids[2]] });
  });

  it("bad input is a JobError, nothing written", async () => {
    const before = Number((await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all}"))[0]?.n);
    const cases: [() => Promise<unknown>, RegExp][] = [
      [() => enqueueBatch([{ task: "a" }], { db: t.db, onComplete: { task: "cb", delay: 1 } as never }), /unknown option/i],
      [() => enqueueBatch([{ task: "a", dependsOn: [1] }], { db: t.db }), /cannot have dependencies/],
      [() => enqueueBatch([{ task: "a", tenant: "b" }], { db: t.db, tenant: "a" }), /must be the batch's tenant/],
      [() => enqueueBatch([{ task: "a" }], { db: t.db, onComplete: { task: "" } }), /task/],
      [() => enqueueBatch("x" as never, { db: t.db }), /items must be an array/],
      [() => enqueueBatch([{ task: "a", idempotencyKey: "k" }], { db: t.db }), /cannot have keys/],
    ];
    for (const [call, message] of cases) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(JobError);
      expect((error as Error).message).toMatch(message);
    }
    expect(Number((await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all}"))[0]?.n)).toBe(before);
  });
});
