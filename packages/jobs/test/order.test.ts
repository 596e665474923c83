import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, processOne, statusCounts, pendingCount, PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_NORMAL } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("claim order and delays ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("names the priorities -10, 0 and 10", () => {
    expect([PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_HIGH]).toEqual([-10, 0, 10]);
  });

  it("claims by priority DESC, then oldest first, with any integer priority", async () => {
    const queue = "order";
    const plan: [string, number][] = [
      ["n1", PRIORITY_NORMAL],
      ["low", PRIORITY_LOW],
      ["h1", PRIORITY_HIGH],
      ["n2", PRIORITY_NORMAL],
      ["five", 5],
      ["h2", PRIORITY_HIGH],
      ["huge", 1000],
      ["neg", -11],
    ];
    for (const [name, priority] of plan) await enqueue("record", { name }, { db: t.db, queue, priority });
    const seen: string[] = [];
    while (await processOne({ record: (p: { name: string }) => void seen.push(p.name) }, { db: t.db, queue }));
    expect(seen).toEqual(["huge", "h1", "h2", "five", "n1", "n2", "low", "neg"]);
  });

  it("keeps several named queues apart", async () => {
    await enqueueMany(
      [
        { task: "a", queue: "q1" },
        { task: "b", queue: "q2" },
        { task: "c", queue: "q1" },
      ],
      { db: t.db },
    );
    expect(await pendingCount({ db: t.db, queue: "q1" })).toBe(2);
    expect(await pendingCount({ db: t.db, queue: "q2" })).toBe(1);
    const ran: string[] = [];
    const handlers = { a: () => void ran.push("a"), b: () => void ran.push("b"), c: () => void ran.push("c") };
    while (await processOne(handlers, { db: t.db, queue: "q1" }));
    expect(ran).toEqual(["a", "c"]);
    expect(await pendingCount({ db: t.db, queue: "q2" })).toBe(1);
  });

  it("delays a job with availableIn: PENDING counts it, READY does not, and no worker takes it", async () => {
    const queue = "delayed";
    const id = await enqueue("later", null, { db: t.db, queue, availableIn: 3600 });
    await enqueue("now", null, { db: t.db, queue });
    const [status] = await statusCounts({ db: t.db, queue });
    expect(status).toMatchObject({ queue, counts: { pending: 2 }, ready: 1, total: 2 });
    const ran: string[] = [];
    while (await processOne({ later: () => void ran.push("later"), now: () => void ran.push("now") }, { db: t.db, queue }));
    expect(ran).toEqual(["now"]);
    const [row] = await t.sql<{ run_at: unknown }>("SELECT run_at FROM {all} WHERE id = $1", [id]);
    const runAt = new Date(typeof row!.run_at === "number" ? row!.run_at : String(row!.run_at instanceof Date ? row!.run_at.toISOString() : row!.run_at));
    const delay = (runAt.getTime() - (await t.now()).getTime()) / 1000;
    expect(delay).toBeGreaterThan(3590);
    expect(delay).toBeLessThanOrEqual(3600);
  });
});
