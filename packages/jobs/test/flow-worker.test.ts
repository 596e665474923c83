// Dependencies and batches (issue 19) through workers (createWorker, the path production runs:
// batched completions, several workers at once), not processOne/drain: a dependent and a batch's
// callback run exactly once, and only after the last of their jobs ended. The test decides when
// each handler returns (a gate per job), so the order is deterministic. All backends.
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
   * Two workers on one queue, two slots each and nothing prefetched: four jobs run at once,
   * two on each, so the test can end the last two on two different workers at the same instant.
   */
  function twoWorkers(queue: string, handlers: (worker: string) => Handlers) {
    const stop = new AbortController();
    const runs = ["A", "B"].map((name) =>
      createWorker(handlers(name), {
        db: t.db,
        queue,
        concurrency: 2,
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

  it("workers release a dependent exactly once, after its last dependency ended, when the last two end at once on two workers", async () => {
    const queue = "worker-deps";
    const r = recorder();
    const deps = [
      await enqueue("step", null, { db: t.db, queue }),
      await enqueue("step", null, { db: t.db, queue }),
      await enqueue("step", null, { db: t.db, queue }),
    ];
    const joined = await enqueue("join", null, { db: t.db, queue, dependsOn: deps });
    const seen: DependencyInfo[][] = [];
    const stop = twoWorkers(queue, (worker) => ({
      step: (p, ctx) => r.gated(p, ctx, worker),
      join: async (_p, ctx) => {
        r.log.push(`start ${ctx.job.id}`);
        seen.push(await ctx.dependencies());
        return "joined";
      },
    }));
    try {
      await waitFor("the three dependencies running", async () => deps.every((id) => r.ranOn.has(id)));
      const onA = deps.filter((id) => r.ranOn.get(id) === "A");
      const onB = deps.filter((id) => r.ranOn.get(id) === "B");
      expect([onA.length, onB.length].sort()).toEqual([1, 2]);
      // First the one that shares its worker with another; its end is written, the join still waits.
      const [first, ...lastTwo] = onA.length === 2 ? [onA[0]!, onA[1]!, onB[0]!] : [onB[0]!, onB[1]!, onA[0]!];
      r.finish(first);
      await untilStatus(first, "done");
      expect(await status(joined)).toBe("waiting");
      expect(r.starts(joined)).toBe(0);
      // The last two, on two workers, in the same tick.
      for (const id of lastTwo) r.finish(id);
      await untilStatus(joined, "done");
    } finally {
      for (const id of deps) r.finish(id);
      await stop();
    }
    expect(r.starts(joined)).toBe(1);
    for (const id of deps) expect(r.at(`start ${joined}`)).toBeGreaterThan(r.at(`end ${id}`));
    expect(seen).toEqual([deps.map((id) => ({ id, task: "step", status: "done", result: { from: id } }))]);
    expect(await getJob(joined, { db: t.db })).toMatchObject({ status: "done", attempts: 1, result: "joined" });
  });

  it("workers run a batch's callback exactly once, after its last item ended, when the last two end at once on two workers", async () => {
    const queue = "worker-batch";
    const r = recorder();
    const { batchId, ids, callbackId } = await enqueueBatch([{ task: "item" }, { task: "item" }, { task: "item" }, { task: "item" }], {
      db: t.db,
      queue,
      onComplete: { task: "report" },
    });
    const callback = callbackId as number;
    const seen: (BatchSummary | null)[] = [];
    const stop = twoWorkers(queue, (worker) => ({
      item: (p, ctx) => r.gated(p, ctx, worker),
      report: async (_p, ctx) => {
        r.log.push(`start ${ctx.job.id}`);
        seen.push(await ctx.batch());
      },
    }));
    let failed = 0;
    try {
      await waitFor("the four items running", async () => ids.every((id) => r.ranOn.has(id)));
      const onA = ids.filter((id) => r.ranOn.get(id) === "A");
      const onB = ids.filter((id) => r.ranOn.get(id) === "B");
      expect([onA.length, onB.length]).toEqual([2, 2]);
      // One item of each worker ends (one of them failing for good); the callback still waits.
      failed = onA[0]!;
      r.finish(failed, "fail");
      await untilStatus(failed, "failed");
      r.finish(onB[0]!);
      await untilStatus(onB[0]!, "done");
      expect(await status(callback)).toBe("waiting");
      expect(r.starts(callback)).toBe(0);
      // The last two, one on each worker, in the same tick.
      r.finish(onA[1]!);
      r.finish(onB[1]!);
      await untilStatus(callback, "done");
    } finally {
      for (const id of ids) r.finish(id);
      await stop();
    }
    expect(r.starts(callback)).toBe(1);
    for (const id of ids) expect(r.at(`start ${callback}`)).toBeGreaterThan(r.at(`end ${id}`));
    expect(seen).toEqual([{ batchId, done: 3, failed: 1, cancelled: 0, failedIds: [failed] }]);
    expect(await getJob(callback, { db: t.db })).toMatchObject({ status: "done", attempts: 1 });
  });
});
