import Database from "better-sqlite3";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { drain, enqueue, enqueueBatch, enqueueMany, getJob, JobError, pendingCount, processOne, reclaim } from "@forge/jobs";
import { orders, placeOrder, placeOrderWithFlow, saveBatch } from "../examples/drizzle-sqlite.js";
import { BATCH_HANDLERS, BATCH_ITEMS, batchRow, edgesOf, FLOW, FLOW_HANDLERS } from "../src/conformance.js";
import { backends, createTarget, type Target } from "../src/targets.js";

describe.skipIf(!backends().includes("sqlite"))("Drizzle on sqlite (better-sqlite3: synchronous transactions)", () => {
  let t: Target;
  let client: Database.Database;
  let db: BetterSQLite3Database & { $client: Database.Database };
  let other: Database.Database;
  beforeAll(async () => {
    t = await createTarget("sqlite");
    client = new Database(t.file);
    db = drizzle({ client });
    other = new Database(t.file, { readonly: true });
  });
  afterAll(async () => {
    client?.close();
    other?.close();
    await t?.drop();
  });
  const jobsSeenOutside = (queue: string) => (other.prepare("SELECT count(*) AS n FROM jobs WHERE queue = ?").get(queue) as { n: number }).n;

  it("commit publishes the order and its job together; no other connection sees the job before the commit", async () => {
    let job!: Promise<number>;
    let inside = -1;
    let outside = -1;
    db.transaction((tx) => {
      tx.insert(orders).values({ item: "book" }).run();
      job = enqueue("ship", { item: "book" }, { db: client, queue: "commit" });
      inside = (client.prepare("SELECT count(*) AS n FROM jobs WHERE queue = 'commit'").get() as { n: number }).n;
      outside = jobsSeenOutside("commit");
    });
    const id = await job;
    expect([inside, outside]).toEqual([1, 0]);
    expect(await t.orders()).toContain("book");
    expect(await processOne({ ship: () => "shipped" }, { db: t.queue, queue: "commit" })).toBe(true);
    expect(await getJob(id, { db: t.queue })).toMatchObject({ status: "done", result: "shipped" });
  });

  it("rollback leaves neither the order nor its job", async () => {
    let job!: Promise<number>;
    expect(() =>
      db.transaction((tx) => {
        tx.insert(orders).values({ item: "lamp" }).run();
        job = enqueue("ship", { item: "lamp" }, { db: client, queue: "rollback" });
        throw new Error("payment declined");
      }),
    ).toThrow("payment declined");
    expect(await getJob(await job, { db: t.queue })).toBeNull();
    expect(await t.orders()).not.toContain("lamp");
    expect(await pendingCount({ db: t.queue, queue: "rollback" })).toBe(0);
  });

  const count = async (text: string, params: unknown[] = []) => Number((await t.sql<{ n: number | string }>(text, params))[0]!.n);

  it("enqueueMany in the transaction (one INSERT): all the jobs with the commit, none with a rollback", async () => {
    const items = Array.from({ length: 50 }, (_, i) => ({ task: "ship", payload: { i } }));
    let job!: Promise<number[]>;
    expect(() =>
      db.transaction((tx) => {
        tx.insert(orders).values({ item: "crate-lost" }).run();
        job = enqueueMany(items, { db: client, queue: "many" });
        throw new Error("payment declined");
      }),
    ).toThrow("payment declined");
    const lost = await job;
    expect(lost).toHaveLength(50);
    expect(await count("SELECT count(*) AS n FROM jobs WHERE queue = 'many'")).toBe(0);
    db.transaction((tx) => {
      tx.insert(orders).values({ item: "crate" }).run();
      job = enqueueMany(items, { db: client, queue: "many" });
    });
    const ids = await job;
    expect(new Set(ids).size).toBe(50);
    expect(await pendingCount({ db: t.queue, queue: "many" })).toBe(50);
    expect((await getJob(ids[49]!, { db: t.queue }))!.payload).toEqual({ i: 49 });
    expect(await t.orders()).toContain("crate");
    expect(await t.orders()).not.toContain("crate-lost");
  });

  // Before the refusal, a flow's statements after its first await ran outside the ended
  // transaction: its jobs survived the ROLLBACK, and on a commit the zip was briefly claimable.
  it("a flow, a batch, or a keyed or larger enqueueMany inside the synchronous transaction is a JobError and writes none of itself, on commit as on rollback", async () => {
    const calls = {
      flow: () => enqueueMany(FLOW, { db: client, queue: "sync" }),
      batch: () => enqueueBatch(BATCH_ITEMS, { db: client, queue: "sync", onComplete: { task: "campaign" } }),
      larger: () =>
        enqueueMany(
          Array.from({ length: 2001 }, () => ({ task: "ship" })),
          { db: client, queue: "sync" },
        ),
      keyed: () => enqueueMany([{ task: "ship", idempotencyKey: "sync-1" }, { task: "ship" }], { db: client, queue: "sync" }),
    };
    const edges = await count("SELECT count(*) AS n FROM jobs_dependencies");
    const batches = await count("SELECT count(*) AS n FROM jobs_batches");
    for (const [name, call] of Object.entries(calls)) {
      for (const commit of [true, false]) {
        let job!: Promise<unknown>;
        const run = () =>
          db.transaction((tx) => {
            tx.insert(orders)
              .values({ item: `${name}-${commit}` })
              .run();
            job = call();
            if (!commit) throw new Error("payment declined");
          });
        if (commit) run();
        else expect(run).toThrow("payment declined");
        const error = await job.then(
          () => null,
          (e: unknown) => e,
        );
        expect(error, `${name}, commit: ${commit}`).toBeInstanceOf(JobError);
        expect((error as Error).message).toMatch(/BEGIN IMMEDIATE/);
        expect(await t.orders()).toSatisfy((items: string[]) => items.includes(`${name}-${commit}`) === commit);
      }
    }
    expect(await count("SELECT count(*) AS n FROM jobs WHERE queue = 'sync'")).toBe(0);
    expect(await count("SELECT count(*) AS n FROM jobs_dependencies")).toBe(edges);
    expect(await count("SELECT count(*) AS n FROM jobs_batches")).toBe(batches);
  });

  it("a flow and a batch in a transaction opened on the handle (BEGIN IMMEDIATE … COMMIT): jobs, edges and batch row with the commit, none with a rollback", async () => {
    const inTransaction = async <T>(commit: boolean, fn: () => Promise<T>): Promise<T> => {
      client.exec("BEGIN IMMEDIATE");
      try {
        db.insert(orders)
          .values({ item: commit ? "kit" : "kit-lost" })
          .run();
        return await fn();
      } finally {
        client.exec(commit ? "COMMIT" : "ROLLBACK");
      }
    };
    const both = async () => ({
      flow: await enqueueMany(FLOW, { db: client, queue: "flow" }),
      batch: await enqueueBatch(BATCH_ITEMS, { db: client, queue: "batch", onComplete: { task: "campaign" } }),
    });
    const lost = await inTransaction(false, both);
    for (const id of [...lost.flow, ...lost.batch.ids, lost.batch.callbackId!]) expect(await getJob(id, { db: t.queue })).toBeNull();
    expect(await edgesOf(t, lost.flow)).toEqual([]);
    expect(await batchRow(t, lost.batch.batchId)).toBeNull();
    expect(await t.orders()).not.toContain("kit-lost");

    const kept = await inTransaction(true, both);
    const [p1, p2, zip] = kept.flow as [number, number, number];
    expect(await t.orders()).toContain("kit");
    expect(await edgesOf(t, kept.flow)).toEqual([
      [zip, p1],
      [zip, p2],
    ]);
    expect(await batchRow(t, kept.batch.batchId)).toEqual({ total: 2, callbackId: kept.batch.callbackId });
    expect(await drain(FLOW_HANDLERS, { db: t.queue, queue: "flow" })).toBe(3);
    expect(await getJob(zip, { db: t.queue })).toMatchObject({ status: "done", result: ["page 1", "page 2"] });
    expect(await drain(BATCH_HANDLERS, { db: t.queue, queue: "batch" })).toBe(3);
    expect(await getJob(kept.batch.callbackId!, { db: t.queue })).toMatchObject({ status: "done", result: { done: 2, failed: 0 } });
  });

  it("the README's example: placeOrderWithFlow publishes the order and its flow in one transaction on the handle", async () => {
    const [invoice, ship] = (await placeOrderWithFlow(db, "desk")) as [number, number];
    expect(await t.orders()).toContain("desk");
    expect(await getJob(ship, { db: t.queue })).toMatchObject({ status: "waiting", dependsOn: [invoice], payload: { item: "desk" } });
    expect(client.inTransaction).toBe(false);
    // Out of the default queue, where the next test's placeOrder looks for its job.
    expect(await drain({ invoice: () => "invoiced", ship: () => "shipped" }, { db: t.queue, queue: "default" })).toBe(2);
    expect(await getJob(ship, { db: t.queue })).toMatchObject({ status: "done" });
  });

  it("a keyed enqueue in the transaction returns the committed winner's id, as outside it", async () => {
    const winner = await enqueue("ship", { first: true }, { db: t.queue, queue: "keyed", idempotencyKey: "order-1" });
    let job!: Promise<number>;
    db.transaction(() => {
      job = enqueue("ship", { first: false }, { db: client, queue: "keyed", idempotencyKey: "order-1" });
    });
    expect(await job).toBe(winner);
    expect(await pendingCount({ db: t.queue, queue: "keyed" })).toBe(1);
  });

  // Before, the throttle's read of the database clock was awaited before the INSERT: the
  // synchronous transaction had ended by then, and its rollback kept the job.
  it("a throttled enqueue in the transaction: its job with the commit, none with a rollback; the window answers with the committed job's id", async () => {
    const throttle = { key: "digest-7", seconds: 3600 };
    let job!: Promise<number>;
    expect(() =>
      db.transaction((tx) => {
        tx.insert(orders).values({ item: "throttled-lost" }).run();
        job = enqueue("ship", { n: 1 }, { db: client, queue: "throttled", throttle });
        throw new Error("payment declined");
      }),
    ).toThrow("payment declined");
    await job;
    expect(await count("SELECT count(*) AS n FROM jobs WHERE queue = 'throttled'")).toBe(0);
    db.transaction((tx) => {
      tx.insert(orders).values({ item: "throttled" }).run();
      job = enqueue("ship", { n: 2 }, { db: client, queue: "throttled", throttle });
    });
    const id = await job;
    expect(await enqueue("ship", { n: 3 }, { db: t.queue, queue: "throttled", throttle })).toBe(id);
    expect(await pendingCount({ db: t.queue, queue: "throttled" })).toBe(1);
  });

  it("the README's example: placeOrder, then saveBatch through ctx.checkpoint, fenced once the job is taken over", async () => {
    const id = await placeOrder(db, "pen");
    let fenced: boolean | undefined;
    await processOne(
      {
        ship: async (_p: unknown, ctx) => {
          expect(await saveBatch(ctx, ["nib"], 1)).toBe(true);
          await reclaim({ db: t.queue, lease: 0 });
          fenced = !(await saveBatch(ctx, ["ink"], 2));
        },
      },
      { db: t.queue, queue: "default" },
    );
    expect(fenced).toBe(true);
    expect(await t.orders()).toEqual(expect.arrayContaining(["pen", "nib"]));
    expect(await t.orders()).not.toContain("ink");
    expect(await getJob(id, { db: t.queue })).toMatchObject({ progress: { cursor: 1 } });
  });
});
