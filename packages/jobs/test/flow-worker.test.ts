// Dependencies and batches (issue 19) through workers (createWorker, the path production runs:
// batched completions, several workers at once), not processOne/drain: a dependent and a batch's
// callback run exactly once, and only after the last of their jobs ended. The test decides when
// each handler returns (a gate per job), so the order is deterministic: some jobs end alone, the
// last two end at the same instant on two workers. All backends.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorker, enqueue, enqueueBatch, getJob, type BatchSummary, type DependencyInfo, type Handlers, type JobContext } from "../src/index.js";
import { backends, deferred, waitFor, type TestDatabase } from "./helpers/backends.js";

/** How the test ends a gated job's run: its handler returns, or throws a permanent error. */
type Outcome = "return" | "fail";

describe.each(backends())("dependencies and batches through workers ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /**
   * What the handlers saw, in the order it happened: `start <id>` when a handler is entered,
   * `end <id>` just before a gated one returns or throws. `ranOn` says which worker ran a job.
   */
  function recorder() {
    const log: string[] = [];
    const ranOn = new Map<number, string>();
    const gates = new Map<number, ReturnType<typeof deferred<Outcome>>>();
    const gate = (id: number) => gates.get(id) ?? gates.set(id, deferred<Outcome>()).get(id)!;
    /** A job that runs until the test ends it with `finish`. */
    const gated = async (_p: unknown, ctx: JobContext, worker: string) => {
      log.push(`start ${ctx.job.id}`);
      ranOn.set(ctx.job.id, worker);
      const outcome = await gate(ctx.job.id).promise;
      log.push(`end ${ctx.job.id}`);
      if (outcome === "fail") throw Object.assign(new Error(`job ${ctx.job.id} failed on purpose`), { retryable: false });
      return { from: ctx.job.id };
    };
    const finish = (id: number, outcome: Outcome = "return") => gate(id).resolve(outcome);
    const starts = (id: number) => log.filter((line) => line === `start ${id}`).length;
    /** Where `line` is in the log (fails the test when absent). */
    const at = (line: string) => {
      const index = log.indexOf(line);
      expect(index, `${line} in ${JSON.stringify(log)}`).toBeGreaterThanOrEqual(0);
      return index;
    };
    return { log, ranOn, gated, finish, starts, at };
  }

  /**
   * Two workers on one queue, `concurrency` slots each and nothing prefetched, so the test
   * knows how many jobs run at once and can end the last two on two different workers at the
   * same instant.
   */
  function twoWorkers(queue: string, concurrency: number, handlers: (worker: string) => Handlers) {
    const stop = new AbortController();
    const runs = ["A", "B"].map((name) =>
      createWorker(handlers(name), {
        db: t.db,
        queue,
        concurrency,
        prefetch: 0,
        pollInterval: 0.05,
        sweepInterval: 0,
        schedules: false,
        workerId: `worker-${name}`,
        signal: stop.signal,
      }).run(),
    );
    return async () => {
      stop.abort();
      await Promise.all(runs);
    };
  }

  const status = async (id: number) => (await getJob(id, { db: t.db }))?.status;
  const untilStatus = (id: number, wanted: string) => waitFor(`job ${id} ${wanted}`, async () => (await status(id)) === wanted);
  const byId = (ids: number[]) => [...ids].sort((a, b) => a - b);

  it("workers release a dependent exactly once, after its last dependency ended: ended one at a time, and the last two at once on two workers", async () => {
    const queue = "worker-deps";
    const r = recorder();
    const deps: number[] = [];
    for (let i = 0; i < 4; i++) deps.push(await enqueue("step", null, { db: t.db, queue }));
    const joined = await enqueue("join", null, { db: t.db, queue, dependsOn: deps });
    const seen = new Map<number, DependencyInfo[]>();
    const stop = twoWorkers(queue, 2, (worker) => ({
      step: (p, ctx) => r.gated(p, ctx, worker),
      join: async (_p, ctx) => {
        r.log.push(`start ${ctx.job.id}`);
        seen.set(ctx.job.id, await ctx.dependencies());
        return "joined";
      },
    }));
    let pair: number[] = [];
    let pairJoin = 0;
    try {
      await waitFor("the four dependencies running", async () => deps.every((id) => r.ranOn.has(id)));
      const onA = deps.filter((id) => r.ranOn.get(id) === "A");
      const onB = deps.filter((id) => r.ranOn.get(id) === "B");
      expect([onA.length, onB.length]).toEqual([2, 2]);
      // A dependent of one job on each worker, enqueued while they run: the first end leaves it
      // waiting, the second releases it.
      pair = [onA[0]!, onB[0]!];
      pairJoin = await enqueue("join", null, { db: t.db, queue, dependsOn: pair });
      expect(await status(pairJoin)).toBe("waiting");
      r.finish(onA[0]!);
      await untilStatus(onA[0]!, "done");
      expect(await status(pairJoin)).toBe("waiting");
      expect(r.starts(pairJoin)).toBe(0);
      r.finish(onB[0]!);
      await untilStatus(pairJoin, "done");
      expect(await status(joined)).toBe("waiting");
      expect(r.starts(joined)).toBe(0);
      // The last two of `joined`'s, one on each worker, in the same tick.
      r.finish(onA[1]!);
      r.finish(onB[1]!);
      await untilStatus(joined, "done");
    } finally {
      for (const id of deps) r.finish(id);
      await stop();
    }
    for (const [dependent, its] of [
      [pairJoin, pair],
      [joined, deps],
    ] as const) {
      expect(r.starts(dependent)).toBe(1);
      for (const id of its) expect(r.at(`start ${dependent}`)).toBeGreaterThan(r.at(`end ${id}`));
      expect(seen.get(dependent)).toEqual(byId(its).map((id) => ({ id, task: "step", status: "done", result: { from: id } })));
      expect(await getJob(dependent, { db: t.db })).toMatchObject({ status: "done", attempts: 1, result: "joined" });
    }
  });

  it("workers run a batch's callback exactly once, after its last item ended: ended one at a time, and the last two at once on two workers", async () => {
    const queue = "worker-batch";
    const r = recorder();
    const items = (n: number) => Array.from({ length: n }, () => ({ task: "item" }));
    const big = await enqueueBatch(items(4), { db: t.db, queue, onComplete: { task: "report" } });
    const seen = new Map<number, BatchSummary | null>();
    // Three slots each: the four items run at once, on both workers, with two slots to spare.
    const stop = twoWorkers(queue, 3, (worker) => ({
      item: (p, ctx) => r.gated(p, ctx, worker),
      report: async (_p, ctx) => {
        r.log.push(`start ${ctx.job.id}`);
        seen.set(ctx.job.id, await ctx.batch());
      },
    }));
    let small = big;
    let failed = 0;
    try {
      await waitFor("the four items running", async () => big.ids.every((id) => r.ranOn.has(id)));
      const onA = big.ids.filter((id) => r.ranOn.get(id) === "A");
      const onB = big.ids.filter((id) => r.ranOn.get(id) === "B");
      expect(onA.length).toBeGreaterThan(0);
      expect(onB.length).toBeGreaterThan(0);
      // A batch of two on the spare slots, ended one at a time: the first end leaves its
      // callback waiting, the second releases it.
      small = await enqueueBatch(items(2), { db: t.db, queue, onComplete: { task: "report" } });
      await waitFor("the small batch's items running", async () => small.ids.every((id) => r.ranOn.has(id)));
      r.finish(small.ids[0]!);
      await untilStatus(small.ids[0]!, "done");
      expect(await status(small.callbackId!)).toBe("waiting");
      expect(r.starts(small.callbackId!)).toBe(0);
      r.finish(small.ids[1]!);
      await untilStatus(small.callbackId!, "done");
      // The big batch: all but the last two end alone (one failing for good), the callback waits;
      // then the last two, one on each worker, in the same tick.
      const lastTwo = [onA.at(-1)!, onB.at(-1)!];
      const alone = big.ids.filter((id) => !lastTwo.includes(id));
      failed = alone[0]!;
      r.finish(failed, "fail");
      await untilStatus(failed, "failed");
      r.finish(alone[1]!);
      await untilStatus(alone[1]!, "done");
      expect(await status(big.callbackId!)).toBe("waiting");
      expect(r.starts(big.callbackId!)).toBe(0);
      for (const id of lastTwo) r.finish(id);
      await untilStatus(big.callbackId!, "done");
    } finally {
      for (const id of [...big.ids, ...small.ids]) r.finish(id);
      await stop();
    }
    for (const batch of [small, big]) {
      const callback = batch.callbackId!;
      expect(r.starts(callback)).toBe(1);
      for (const id of batch.ids) expect(r.at(`start ${callback}`)).toBeGreaterThan(r.at(`end ${id}`));
      expect(await getJob(callback, { db: t.db })).toMatchObject({ status: "done", attempts: 1 });
    }
    expect(seen.get(small.callbackId!)).toEqual({ batchId: small.batchId, done: 2, failed: 0, cancelled: 0, failedIds: [] });
    expect(seen.get(big.callbackId!)).toEqual({ batchId: big.batchId, done: 3, failed: 1, cancelled: 0, failedIds: [failed] });
  });
});
