import Database from "better-sqlite3";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, pendingCount, processOne, reclaim } from "@forge/jobs";
import { orders, placeOrder, saveBatch } from "../examples/drizzle-sqlite.js";
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

  it("a keyed enqueue in the transaction returns the committed winner's id, as outside it", async () => {
    const winner = await enqueue("ship", { first: true }, { db: t.queue, queue: "keyed", idempotencyKey: "order-1" });
    let job!: Promise<number>;
    db.transaction(() => {
      job = enqueue("ship", { first: false }, { db: client, queue: "keyed", idempotencyKey: "order-1" });
    });
    expect(await job).toBe(winner);
    expect(await pendingCount({ db: t.queue, queue: "keyed" })).toBe(1);
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
