import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, createWorker, drain, enqueue, getJob, JobError, pauseQueue, processOne, resumeQueue, statusCounts, type Worker } from "../src/index.js";
import { backends, deferred, uniqueName, waitFor, type TestDatabase } from "./helpers/backends.js";

/** Poll interval of the workers here, in seconds: "several poll intervals" are a few of these. */
const POLL = 0.05;

/** Lets `intervals` poll intervals go by: what a test of "nothing starts" must wait out. */
function pollIntervals(intervals: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, POLL * 1000 * intervals));
}

describe.each(backends())("pauseQueue and resumeQueue ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** A second connection to the same queue: another process's view. */
  function otherConnection() {
    return connect(t.url, t.schema ? { schema: t.schema } : {});
  }

  it("a paused queue's pending job starts on none of 2 workers for several polls, other queues run, and it runs after resume", async () => {
    const paused = uniqueName("pq");
    const other = uniqueName("oq");
    expect(await pauseQueue(paused, { db: t.db })).toBe(true);
    const held = await enqueue("work", { n: 1 }, { db: t.db, queue: paused });
    const free = await enqueue("work", { n: 2 }, { db: t.db, queue: other });
    const second = otherConnection();
    const started: number[] = [];
    const ac = new AbortController();
    const workers: Worker[] = [t.db, second].map((db) => {
      const worker = createWorker({ work: () => "ok" }, { db, queue: [paused, other], pollInterval: POLL, signal: ac.signal, schedules: false });
      worker.on("job:started", ({ job }) => started.push(job.id));
      return worker;
    });
    const running = workers.map((w) => w.run());
    try {
      await waitFor("the other queue's job done", async () => (await getJob(free, { db: t.db }))?.status === "done");
      await pollIntervals(8);
      expect(started).not.toContain(held);
      expect(await getJob(held, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });

      expect(await resumeQueue(paused, { db: second })).toBe(true);
      await waitFor("the resumed queue's job done", async () => (await getJob(held, { db: t.db }))?.status === "done");
      expect(started.filter((id) => id === held)).toHaveLength(1);
    } finally {
      ac.abort();
      await Promise.all(running);
      await second.close();
    }
  });

  it("a running job finishes after its queue is paused; its buffered jobs are handed back unstarted", async () => {
    const queue = uniqueName("pr");
    const entered = deferred();
    const release = deferred();
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push(await enqueue("slow", { i }, { db: t.db, queue }));
    const started: number[] = [];
    const released: number[] = [];
    const ac = new AbortController();
    // One slot and a buffer: the first job runs, the other two wait claimed and unstarted.
    const worker = createWorker(
      {
        slow: async () => {
          entered.resolve();
          await release.promise;
          return "finished";
        },
      },
      { db: t.db, queue, concurrency: 1, prefetch: 5, pollInterval: POLL, signal: ac.signal, schedules: false },
    );
    worker.on("job:started", ({ job }) => started.push(job.id));
    worker.on("job:released", ({ job }) => released.push(job.id));
    const running = worker.run();
    try {
      await entered.promise;
      expect(started).toEqual([ids[0]]);
      await pauseQueue(queue, { db: t.db });
      await waitFor("the buffered jobs handed back", async () => released.length === 2);
      expect(released.sort((a, b) => a - b)).toEqual([ids[1], ids[2]]);
      release.resolve();
      await waitFor("the running job done", async () => (await getJob(ids[0]!, { db: t.db }))?.status === "done");
      expect((await getJob(ids[0]!, { db: t.db }))!.result).toBe("finished");
      await pollIntervals(8);
      expect(started).toEqual([ids[0]]);
      for (const id of [ids[1]!, ids[2]!]) expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });

      await resumeQueue(queue, { db: t.db });
      await waitFor("every job done", async () => {
        const jobs = await Promise.all(ids.map((id) => getJob(id, { db: t.db })));
        return jobs.every((job) => job?.status === "done");
      });
    } finally {
      release.resolve();
      ac.abort();
      await running;
    }
  });

  it("a worker polling rarely learns of a pause and a resume at once (woken), not at its next poll", async () => {
    const queue = uniqueName("pw");
    const idle = deferred();
    const done = deferred<number>();
    const ac = new AbortController();
    const worker = createWorker({ ping: () => "pong" }, { db: t.db, queue, pollInterval: 60, signal: ac.signal, schedules: false });
    worker.on("worker:idle", () => idle.resolve());
    worker.on("job:succeeded", ({ job }) => done.resolve(job.id));
    const running = worker.run();
    try {
      await idle.promise;
      await pauseQueue(queue, { db: t.db });
      const id = await enqueue("ping", null, { db: t.db, queue });
      await pollIntervals(10);
      expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });
      const resumedAt = Date.now();
      await resumeQueue(queue, { db: t.db });
      expect(await done.promise).toBe(id);
      expect(Date.now() - resumedAt).toBeLessThan(10_000);
    } finally {
      ac.abort();
      await running;
    }
  });

  it("the pause is stored: a new connection sees it, processOne and drain leave the queue alone until resumed", async () => {
    const queue = uniqueName("ps");
    await pauseQueue(queue, { db: t.db });
    expect(await pauseQueue(queue, { db: t.db })).toBe(false);
    const id = await enqueue("work", null, { db: t.db, queue });
    const later = otherConnection();
    try {
      expect(await processOne({ work: () => 1 }, { db: later, queue })).toBe(false);
      expect(await drain({ work: () => 1 }, { db: later, queue })).toBe(0);
      expect(await getJob(id, { db: later })).toMatchObject({ status: "pending", attempts: 0 });
      expect((await statusCounts({ db: later, queue }))[0]).toMatchObject({ queue, paused: true, counts: { pending: 1 } });
      expect(await resumeQueue(queue, { db: later })).toBe(true);
      expect(await resumeQueue(queue, { db: later })).toBe(false);
      expect(await processOne({ work: () => 1 }, { db: later, queue })).toBe(true);
      expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done" });
    } finally {
      await later.close();
    }
  });

  it("statusCounts marks paused queues, and lists a paused queue that has no jobs", async () => {
    const empty = uniqueName("pe");
    const busy = uniqueName("pb");
    await enqueue("work", null, { db: t.db, queue: busy });
    await pauseQueue(empty, { db: t.db });
    const all = await statusCounts({ db: t.db });
    expect(all.find((s) => s.queue === empty)).toMatchObject({ paused: true, total: 0 });
    expect(all.find((s) => s.queue === busy)).toMatchObject({ paused: false, total: 1 });
    await resumeQueue(empty, { db: t.db });
    expect((await statusCounts({ db: t.db })).find((s) => s.queue === empty)).toBeUndefined();
  });

  it("a queue name is checked like any other; nothing is written for a bad one", async () => {
    for (const bad of ["", 7, "x".repeat(256), "a\u0000b"]) {
      await expect(pauseQueue(bad as string, { db: t.db })).rejects.toThrow(JobError);
      await expect(resumeQueue(bad as string, { db: t.db })).rejects.toThrow(JobError);
    }
    await expect(pauseQueue("", { db: t.db })).rejects.toThrow(/queue must be a non-empty string/);
    await expect(pauseQueue("q", { db: t.db, bogus: 1 } as never)).rejects.toThrow(/bogus/);
    expect(await t.sql("SELECT queue FROM " + t.tableName("jobs_queues") + " WHERE queue IN ('', 'q')")).toEqual([]);
  });
});
