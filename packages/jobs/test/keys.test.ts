import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, getJob, processOne, JobError } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("idempotency and dedup keys ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  async function count(where: string, params: unknown[]): Promise<number> {
    const [row] = await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM {all} WHERE ${where}`, params);
    return Number(row!.n);
  }

  it("20 concurrent enqueues with one idempotency key make one job, and all get its id", async () => {
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => enqueue("invoice", { i }, { db: t.db, idempotencyKey: "invoice-12" })));
    expect(results.filter((r) => r.status === "rejected")).toEqual([]);
    const ids = new Set(results.map((r) => (r as PromiseFulfilledResult<number>).value));
    expect(ids.size).toBe(1);
    expect(await count("idempotency_key = $1", ["invoice-12"])).toBe(1);
  });

  it("returns the first job's id for as long as the row exists, even after it ran", async () => {
    const first = await enqueue("once", null, { db: t.db, queue: "idem", idempotencyKey: "k-done" });
    await processOne({ once: () => "ok" }, { db: t.db, queue: "idem" });
    expect((await getJob(first, { db: t.db }))!.status).toBe("done");
    expect(await enqueue("once", null, { db: t.db, queue: "idem", idempotencyKey: "k-done" })).toBe(first);
  });

  it("an empty key is no key", async () => {
    const a = await enqueue("plain", null, { db: t.db, idempotencyKey: "" });
    const b = await enqueue("plain", null, { db: t.db, idempotencyKey: "" });
    const c = await enqueue("plain", null, { db: t.db, dedupKey: "" });
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it("dedupKey refuses a second job while the first is pending or running, and accepts it once it ended", async () => {
    const queue = "dedup";
    const first = await enqueue("sync", { n: 1 }, { db: t.db, queue, dedupKey: "sync-org-7" });
    expect(await enqueue("sync", { n: 2 }, { db: t.db, queue, dedupKey: "sync-org-7" })).toBe(first);
    let duringRun: number | undefined;
    await processOne(
      {
        sync: async () => {
          duringRun = await enqueue("sync", { n: 3 }, { db: t.db, queue, dedupKey: "sync-org-7" });
        },
      },
      { db: t.db, queue },
    );
    expect(duringRun).toBe(first);
    expect((await getJob(first, { db: t.db }))!.status).toBe("done");
    const second = await enqueue("sync", { n: 4 }, { db: t.db, queue, dedupKey: "sync-org-7" });
    expect(second).not.toBe(first);
    expect(await count("dedup_key = $1", ["sync-org-7"])).toBe(2);
  });

  it("a new idempotency key whose dedup key is held by an active job gets that job", async () => {
    const holder = await enqueue("both", null, { db: t.db, queue: "both", dedupKey: "sync-both", idempotencyKey: "first-click" });
    expect(await enqueue("both", null, { db: t.db, queue: "both", dedupKey: "sync-both", idempotencyKey: "second-click" })).toBe(holder);
    expect(await enqueue("both", null, { db: t.db, queue: "both", dedupKey: "sync-both" })).toBe(holder);
  });

  it("20 concurrent enqueues with one dedup key make one active job and none throws", async () => {
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => enqueue("d", null, { db: t.db, queue: "dd", dedupKey: "race" })));
    expect(results.filter((r) => r.status === "rejected")).toEqual([]);
    expect(new Set(results.map((r) => (r as PromiseFulfilledResult<number>).value)).size).toBe(1);
  });

  it("enqueueMany resolves keys inside one batch and against existing rows, ids in input order", async () => {
    const existing = await enqueue("m", null, { db: t.db, queue: "many", idempotencyKey: "m-existing" });
    const ids = await enqueueMany(
      [
        { task: "m", payload: { i: 0 } },
        { task: "m", payload: { i: 1 }, idempotencyKey: "m-existing" },
        { task: "m", payload: { i: 2 }, idempotencyKey: "m-new" },
        { task: "m", payload: { i: 3 }, idempotencyKey: "m-new" },
        { task: "m", payload: { i: 4 } },
      ],
      { db: t.db, queue: "many" },
    );
    expect(ids[1]).toBe(existing);
    expect(ids[3]).toBe(ids[2]);
    expect(new Set(ids).size).toBe(4);
    const payloads = await Promise.all([ids[0]!, ids[2]!, ids[4]!].map(async (id) => (await getJob(id, { db: t.db }))!.payload));
    expect(payloads).toEqual([{ i: 0 }, { i: 2 }, { i: 4 }]);
  });

  it("never hands out another tenant's job through a colliding key", async () => {
    await enqueue("t", null, { db: t.db, tenant: "org-a", idempotencyKey: "shared-key" });
    await expect(enqueue("t", null, { db: t.db, tenant: "org-b", idempotencyKey: "shared-key" })).rejects.toThrow(JobError);
    await expect(enqueue("t", null, { db: t.db, tenant: "org-b", idempotencyKey: "shared-key" })).rejects.toThrow(/another tenant/);
  });

  // (audit 12.6) The conflict is found after the insert: the rows inserted before it must go too.
  it("enqueueMany commits nothing when one item's key is held by another tenant (audit 12.6)", async () => {
    await enqueue("t", null, { db: t.db, queue: "atomic", tenant: "org-a", idempotencyKey: "atomic-held" });
    const before = await count("queue = $1", ["atomic"]);
    const items = [
      { task: "t", payload: { i: 0 }, tenant: "org-b" },
      { task: "t", payload: { i: 1 }, tenant: "org-b", idempotencyKey: "atomic-fresh" },
      { task: "t", payload: { i: 2 }, tenant: "org-b", idempotencyKey: "atomic-held" },
      { task: "t", payload: { i: 3 }, tenant: "org-b" },
    ];
    await expect(enqueueMany(items, { db: t.db, queue: "atomic" })).rejects.toThrow(/items\[2\]\.idempotencyKey is already used by a job of another tenant/);
    expect(await count("queue = $1", ["atomic"])).toBe(before);
    // The same inside the caller's transaction, even when the caller commits after catching the error.
    await t.withTransaction(async (bound) => {
      await expect(enqueueMany(items, { db: bound, queue: "atomic" })).rejects.toThrow(JobError);
    }, "commit");
    expect(await count("queue = $1", ["atomic"])).toBe(before);
  });

  it("enqueueMany over several chunks commits nothing when an item of the last chunk conflicts (audit 12.6)", async () => {
    await enqueue("t", null, { db: t.db, queue: "atomic-chunks", tenant: "org-a", dedupKey: "chunks-held" });
    const items = Array.from({ length: 5001 }, (_, i) => ({ task: "t", payload: { i }, tenant: "org-b" }));
    items.push({ task: "t", payload: { i: 5001 }, tenant: "org-b", dedupKey: "chunks-held" } as (typeof items)[number]);
    await expect(enqueueMany(items, { db: t.db, queue: "atomic-chunks" })).rejects.toThrow(/another tenant/);
    expect(await count("queue = $1", ["atomic-chunks"])).toBe(1);
  });
});
