import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChildJobError, createWorker, enqueue, getJob, processOne, type JobContext } from "../src/index.js";
import { backends, deferred, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("ctx.invoke: a child job's result ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await backend.create();
  });
  afterAll(() => t.close());

  async function children(q: string): Promise<{ id: number; tenant: string | null }[]> {
    const rows = await t.sql<{ id: number | string; tenant: string | null }>(`SELECT id, tenant FROM {all} WHERE queue = $1 AND task = 'child' ORDER BY id`, [
      q,
    ]);
    return rows.map((r) => ({ id: Number(r.id), tenant: r.tenant }));
  }

  it("enqueues the child once, waits without an attempt, and returns its result when it ended; earlier steps come from storage", async () => {
    const q = "invoke";
    const ran: string[] = [];
    const handlers = {
      parent: async (payload: { n: number }, ctx: JobContext) => {
        await ctx.step("before", () => void ran.push("before"));
        const doubled = await ctx.invoke<number>("double", "child", { n: payload.n }, { queue: q });
        ran.push("after");
        return doubled + 1;
      },
      child: (payload: { n: number }) => payload.n * 2,
    };
    const id = await enqueue("parent", { n: 20 }, { db: t.db, queue: q, tenant: "acme", maxAttempts: 1 });
    expect(await processOne(handlers, { db: t.db, queue: q })).toBe(true);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "waiting", attempts: 0 });
    const [child] = await children(q);
    // The child is the parent's tenant's.
    expect(child).toEqual({ id: expect.any(Number), tenant: "acme" });
    expect(await processOne(handlers, { db: t.db, queue: q })).toBe(true);
    expect(await getJob(child!.id, { db: t.db })).toMatchObject({ status: "done", result: 40 });
    expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
    expect(await processOne(handlers, { db: t.db, queue: q })).toBe(true);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", attempts: 1, result: 41 });
    expect(ran).toEqual(["before", "after"]);
    expect(await children(q)).toHaveLength(1);
  });

  it("a child that failed: ctx.invoke throws ChildJobError, which the parent may catch", async () => {
    const q = "invoke-fail";
    let caught: unknown;
    const handlers = {
      parent: async (_p: unknown, ctx: JobContext) => {
        try {
          return await ctx.invoke("risky", "child", null, { queue: q, maxAttempts: 1 });
        } catch (error) {
          if (!(error instanceof ChildJobError)) throw error;
          caught = error;
          return "fallback";
        }
      },
      child: () => {
        throw new Error("boom");
      },
    };
    const id = await enqueue("parent", null, { db: t.db, queue: q });
    for (let i = 0; i < 3; i++) await processOne(handlers, { db: t.db, queue: q });
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: "fallback" });
    expect(caught).toBeInstanceOf(ChildJobError);
    expect((caught as ChildJobError).child).toMatchObject({ status: "failed" });
    expect((caught as Error).message).toMatch(/child job \d+ failed: .*boom/);
  });

  it("holds no slot: with concurrency 1, the child runs while its parent waits, then the parent ends", async () => {
    const q = "invoke-slot";
    const id = await enqueue("parent", null, { db: t.db, queue: q });
    const done = deferred();
    const stop = new AbortController();
    const worker = createWorker(
      {
        parent: async (_p: unknown, ctx: JobContext) => `got ${await ctx.invoke<string>("c", "child", null, { queue: q })}`,
        child: () => "child result",
      },
      { db: t.db, queue: q, concurrency: 1, pollInterval: 0.05, signal: stop.signal },
    );
    worker.on("job:succeeded", (e) => e.job.id === id && done.resolve());
    const running = worker.run();
    await done.promise;
    stop.abort();
    await running;
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", attempts: 1, result: "got child result" });
  });

  it("30 parents and their children under one worker at once: every parent gets its child's result (no wake-up lost to a child ending as its parent begins to wait)", async () => {
    const q = "invoke-race";
    const ids: number[] = [];
    for (let i = 0; i < 30; i++) ids.push(await enqueue("parent", { i }, { db: t.db, queue: q }));
    const left = new Set(ids);
    const done = deferred();
    const stop = new AbortController();
    const worker = createWorker(
      {
        parent: async (payload: { i: number }, ctx: JobContext) => ctx.invoke<number>("c", "child", payload, { queue: q }),
        child: (payload: { i: number }) => payload.i * 10,
      },
      { db: t.db, queue: q, concurrency: 8, pollInterval: 0.05, signal: stop.signal },
    );
    worker.on("job:succeeded", (e) => left.delete(e.job.id) && left.size === 0 && done.resolve());
    const running = worker.run();
    await done.promise;
    stop.abort();
    await running;
    for (let i = 0; i < ids.length; i++) expect(await getJob(ids[i]!, { db: t.db })).toMatchObject({ status: "done", result: i * 10 });
  });

  it("a child that ends after the parent's check but before its wait is recorded: the parent is due again at once, not left waiting", async () => {
    const q = "invoke-meanwhile";
    const childQueue = "invoke-meanwhile-children";
    const id = await enqueue("parent", null, { db: t.db, queue: q });
    const handlers = {
      parent: async (_p: unknown, ctx: JobContext) => {
        try {
          return await ctx.invoke<string>("c", "child", null, { queue: childQueue });
        } catch (error) {
          // The run ends on this throw; before the queue records the wait, the child runs to its end.
          await processOne({ child: () => "quick" }, { db: t.db, queue: childQueue });
          throw error;
        }
      },
    };
    await processOne(handlers, { db: t.db, queue: q });
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });
    await processOne(handlers, { db: t.db, queue: q });
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: "quick" });
  });

  it("options the invocation sets itself are refused: a JobError, the parent failed, no child enqueued", async () => {
    const q = "invoke-bad";
    const id = await enqueue("parent", null, { db: t.db, queue: q, maxAttempts: 3 });
    await processOne(
      { parent: async (_p: unknown, ctx: JobContext) => ctx.invoke("c", "child", null, { queue: q, tenant: "other" } as never) },
      { db: t.db, queue: q },
    );
    const job = await getJob(id, { db: t.db });
    expect(job).toMatchObject({ status: "failed", attempts: 1 });
    expect(job!.lastError).toMatch(/unknown option "tenant"/);
    expect(await children(q)).toEqual([]);
  });
});
