// enqueueMany sends a column once when every job of a chunk shares its value, and as an array
// otherwise (PostgreSQL); a chunk without keys skips ON CONFLICT. Whatever the shape, each job
// must come back exactly as given, with ids in input order.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, getJob, type EnqueueManyItem, type Job } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("enqueueMany, whatever its jobs share ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const stored = async (ids: number[]) => Promise.all(ids.map(async (id) => (await getJob(id, { db: t.db })) as Job));
  const expectAsGiven = (jobs: Job[], items: EnqueueManyItem[]) => {
    jobs.forEach((job, i) => {
      const item = items[i]!;
      expect({
        task: job.task,
        queue: job.queue,
        payload: job.payload,
        priority: job.priority,
        maxAttempts: job.maxAttempts,
        tenant: job.tenant,
        idempotencyKey: job.idempotencyKey,
        dedupKey: job.dedupKey,
        delayed: job.runAt.getTime() - job.createdAt.getTime() > 60_000,
      }).toEqual({
        task: item.task,
        queue: item.queue ?? "default",
        payload: item.payload ?? null,
        priority: item.priority ?? 0,
        maxAttempts: item.maxAttempts ?? 1,
        tenant: item.tenant ?? null,
        idempotencyKey: item.idempotencyKey ?? null,
        dedupKey: item.dedupKey ?? null,
        delayed: (item.availableIn ?? 0) > 60,
      });
    });
  };

  it("a batch where every option varies from job to job", async () => {
    const items: EnqueueManyItem[] = [
      { task: "a", payload: { n: 1 }, queue: "shapes-1", priority: 5, maxAttempts: 3 },
      { task: "b", payload: "text", queue: "shapes-2", priority: -1, tenant: "acme", availableIn: 3600 },
      { task: "a", payload: [1, 2], idempotencyKey: "shape-ik", maxAttempts: 2 },
      { task: "c", queue: "shapes-1", dedupKey: "shape-dk", tenant: "zeta" },
      { task: "b", payload: 42, priority: 5, availableIn: 7200 },
    ];
    const ids = await enqueueMany(items, { db: t.db });
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expectAsGiven(await stored(ids), items);
  });

  it("a batch where every job shares everything but its payload, and one where they share the payload too", async () => {
    const shared = { task: "same", queue: "shapes-3", priority: 7, maxAttempts: 4, tenant: "acme", availableIn: 3600 };
    for (const items of [
      Array.from({ length: 50 }, (_, i) => ({ ...shared, payload: { i } })),
      Array.from({ length: 3 }, () => ({ ...shared, payload: { same: true } })),
    ] as EnqueueManyItem[][]) {
      const ids = await enqueueMany(items, { db: t.db });
      expect(new Set(ids).size).toBe(items.length);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
      expectAsGiven(await stored(ids), items);
    }
  });

  it("keyed and keyless jobs in one batch: keys still deduplicate, the rest are inserted", async () => {
    const items: EnqueueManyItem[] = [
      { task: "k", payload: 1 },
      { task: "k", payload: 2, idempotencyKey: "shape-mixed" },
      { task: "k", payload: 3 },
      { task: "k", payload: 4, idempotencyKey: "shape-mixed" },
    ];
    const ids = await enqueueMany(items, { db: t.db });
    expect(ids[3]).toBe(ids[1]);
    expect(new Set(ids).size).toBe(3);
    const again = await enqueue("k", 5, { db: t.db, idempotencyKey: "shape-mixed" });
    expect(again).toBe(ids[1]);
  });

  it("a single job with every option set", async () => {
    const item = {
      task: "one",
      payload: { deep: { list: [null, "x"] } },
      queue: "shapes-4",
      priority: 3,
      maxAttempts: 9,
      tenant: "t1",
      idempotencyKey: "shape-one",
      dedupKey: "shape-one-d",
      availableIn: 3600,
    };
    const [id] = await enqueueMany([item], { db: t.db });
    expectAsGiven(await stored([id!]), [item]);
  });
});
