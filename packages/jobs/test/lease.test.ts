import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorker, enqueue, getJob, heartbeat, processOne, reclaim, WORKER_LOST_PREFIX, type JobContext } from "../src/index.js";
import { claimJobs } from "../src/run/claim.js";
import { backends, deferred, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("leases, reclaim and fencing ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** A job claimed by a worker that then died: a real claim whose lease nobody extends. */
  async function orphan(queue: string, maxAttempts: number): Promise<number> {
    const id = await enqueue("orphan", null, { db: t.db, queue, maxAttempts });
    const [claimed] = (await claimJobs(t.db, { queues: [queue], limit: 1, start: 1, lease: 0.2, workerId: "dead-worker" })).jobs;
    expect(claimed!.id).toBe(id);
    await waitFor("the lease to expire", async () => {
      const job = await getJob(id, { db: t.db });
      return job?.status === "running" && job.lockedUntil.getTime() < (await t.now()).getTime();
    });
    return id;
  }

  it("a claim sets a lease from the database clock", async () => {
    const id = await enqueue("leased", null, { db: t.db, queue: "lease1" });
    let lockedUntil: Date | undefined;
    let now: Date | undefined;
    await processOne(
      {
        leased: async () => {
          const job = await getJob(id, { db: t.db });
          if (job?.status === "running") lockedUntil = job.lockedUntil;
          now = await t.now();
        },
      },
      { db: t.db, queue: "lease1", lease: 120 },
    );
    const seconds = (lockedUntil!.getTime() - now!.getTime()) / 1000;
    expect(seconds).toBeGreaterThan(118);
    expect(seconds).toBeLessThanOrEqual(120.5);
  });

  it("processOne reports a lost job as the worker does: job:fenced for its lease extension and for its completion", async () => {
    const id = await enqueue("taken", null, { db: t.db, queue: "lease-fenced" });
    const fenced: string[] = [];
    let aborted = false;
    await processOne(
      {
        taken: async (_payload, ctx: JobContext) => {
          await reclaim({ db: t.db, lease: 0, queue: "lease-fenced" });
          await waitFor("the lease keeper to notice", async () => ctx.signal.aborted, 5_000);
          aborted = true;
          return "too late";
        },
      },
      { db: t.db, queue: "lease-fenced", lease: 0.3, events: { "job:fenced": (e) => fenced.push(e.write) } },
    );
    expect(aborted).toBe(true);
    expect(fenced).toEqual(["heartbeat", "complete"]);
    // Taken back with no attempt left: the reclaim's verdict stands, the stale result did not land.
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "failed", result: null });
  });

  it("heartbeat(token) never shortens the lease the claim was made with (audit 12.3)", async () => {
    const id = await enqueue("long-lease", null, { db: t.db, queue: "lease-hb" });
    const remaining: number[] = [];
    const measure = async () => {
      const job = await getJob(id, { db: t.db });
      if (job?.status === "running") remaining.push((job.lockedUntil.getTime() - (await t.now()).getTime()) / 1000);
    };
    await processOne(
      {
        "long-lease": async (_payload, ctx: JobContext) => {
          expect(await heartbeat(ctx.claimToken, { db: t.db })).toBe(true);
          await measure();
          expect(await heartbeat(ctx.claimToken, { db: t.db, lease: 5 })).toBe(true);
          await measure();
          // A longer lease asked by hand is granted.
          expect(await heartbeat(ctx.claimToken, { db: t.db, lease: 300 })).toBe(true);
          await measure();
        },
      },
      { db: t.db, queue: "lease-hb", lease: 120 },
    );
    expect(remaining).toHaveLength(3);
    expect(remaining[0]).toBeGreaterThan(118);
    expect(remaining[1]).toBeGreaterThan(118);
    expect(remaining[2]).toBeGreaterThan(298);
  });

  it("reclaim() puts a lost worker's job back to pending, and fails it with a distinct message when attempts are exhausted", async () => {
    const retryable = await orphan("lost1", 3);
    const exhausted = await orphan("lost2", 1);
    const taken = await reclaim({ db: t.db });
    expect(taken.map((j) => j.id).sort()).toEqual([retryable, exhausted].sort());
    const back = await getJob(retryable, { db: t.db });
    expect(back).toMatchObject({ status: "pending", attempts: 1 });
    expect(back!.lastError).toContain(WORKER_LOST_PREFIX);
    const failed = await getJob(exhausted, { db: t.db });
    expect(failed).toMatchObject({ status: "failed", attempts: 1 });
    expect(failed!.lastError).toMatch(new RegExp(`^${WORKER_LOST_PREFIX}: attempt 1 of 1`));
    expect(failed!.lastError).toContain("dead-worker");
    expect(failed!.lastError).not.toContain("Error:");
  });

  it("reclaim({ lease: 0 }) takes back every running job; queue limits it to one queue", async () => {
    const hold = deferred();
    const started = deferred();
    const id = await enqueue("busy", null, { db: t.db, queue: "lease0" });
    const run = processOne(
      {
        busy: async () => {
          started.resolve();
          await hold.promise;
        },
      },
      { db: t.db, queue: "lease0", lease: 60 },
    );
    await started.promise;
    expect(await reclaim({ db: t.db, lease: 0, queue: "another-queue" })).toEqual([]);
    const taken = await reclaim({ db: t.db, lease: 0, queue: "lease0" });
    expect(taken).toEqual([expect.objectContaining({ id, status: "failed" })]);
    hold.resolve();
    await run;
    // The stale run's completion was fenced out: the reclaim's verdict stands.
    expect((await getJob(id, { db: t.db }))!.status).toBe("failed");
  });

  it("workers sweep on their own: an orphaned job is back in work without any operator", async () => {
    const lost = await orphan("sweep", 2);
    const ran = deferred<number>();
    const ac = new AbortController();
    const rescuer = createWorker(
      { orphan: (_p, ctx: JobContext) => ran.resolve(ctx.job.attempt) },
      { db: t.db, queue: "sweep", sweepInterval: 0.1, pollInterval: 0.05, signal: ac.signal },
    );
    const reclaimed: number[] = [];
    rescuer.on("job:reclaimed", (e) => reclaimed.push(e.job.id));
    const running = rescuer.run();
    expect(await ran.promise).toBe(2);
    expect(reclaimed).toContain(lost);
    await waitFor("the rescued job to be done", async () => (await getJob(lost, { db: t.db }))?.status === "done");
    ac.abort();
    await running;
  });

  it("extends the lease automatically: a handler running 3× the lease is never reclaimed while its worker lives", async () => {
    const id = await enqueue("long", null, { db: t.db, queue: "long" });
    const finished = deferred();
    const ac = new AbortController();
    const worker = createWorker(
      {
        long: async (_p, ctx: JobContext) => {
          // Time-based on purpose: the handler must outlive its lease three times over (what the
          // test is about), while the sweeps every 50 ms find nothing to take.
          const until = Date.now() + 1500;
          while (Date.now() < until) {
            // Another process sweeping all the while must not take the job.
            expect(await reclaim({ db: t.db })).toEqual([]);
            await new Promise((r) => setTimeout(r, 50));
          }
          expect(ctx.signal.aborted).toBe(false);
          finished.resolve();
        },
      },
      { db: t.db, queue: "long", lease: 0.5, signal: ac.signal },
    );
    const fenced: string[] = [];
    worker.on("job:fenced", (e) => fenced.push(e.write));
    // Each accepted extension is an event, stamped with when it left.
    const heartbeats: { id: number; sentAt: Date; seenAt: number }[] = [];
    worker.on("job:heartbeat", (e) => heartbeats.push({ id: e.job.id, sentAt: e.sentAt, seenAt: Date.now() }));
    const running = worker.run();
    await finished.promise;
    await waitFor("the job to be done", async () => (await getJob(id, { db: t.db }))?.status === "done");
    ac.abort();
    await running;
    expect(fenced).toEqual([]);
    expect((await getJob(id, { db: t.db }))!.attempts).toBe(1);
    expect(heartbeats.length).toBeGreaterThanOrEqual(2);
    for (const beat of heartbeats) {
      expect(beat.id).toBe(id);
      expect(beat.sentAt.getTime()).toBeLessThanOrEqual(beat.seenAt);
    }
  });

  it("fencing: after a forced takeover the old run cannot heartbeat, checkpoint, complete or fail, and its signal aborts", async () => {
    const id = await enqueue("contested", { v: 1 }, { db: t.db, queue: "fence", maxAttempts: 3 });
    const oldStarted = deferred<JobContext>();
    const release = deferred();
    const beats: string[] = [];
    const oldRun = processOne(
      {
        contested: async (_p, ctx: JobContext) => {
          oldStarted.resolve(ctx);
          await release.promise;
          throw new Error("the old run failing late");
        },
      },
      {
        db: t.db,
        queue: "fence",
        lease: 60,
        events: {
          "job:heartbeat": (e) => beats.push(`accepted ${e.job.attempt} ${e.claimToken}`),
          "job:fenced": (e) => beats.push(`refused ${e.write} ${e.job.attempt} ${e.claimToken}`),
        },
      },
    );
    const oldCtx = await oldStarted.promise;
    expect(await oldCtx.heartbeat()).toBe(true);
    // Forced takeover: the job is taken back and claimed by a new run, while the old handler still runs.
    await reclaim({ db: t.db, lease: 0, queue: "fence" });
    const newStarted = deferred<JobContext>();
    const newRelease = deferred();
    const newRun = processOne(
      {
        contested: async (_p, ctx: JobContext) => {
          newStarted.resolve(ctx);
          await newRelease.promise;
          return "new wins";
        },
      },
      { db: t.db, queue: "fence", lease: 60 },
    );
    const newCtx = await newStarted.promise;
    expect(newCtx.claimToken).not.toBe(oldCtx.claimToken);

    expect(await oldCtx.heartbeat()).toBe(false);
    expect(oldCtx.signal.aborted).toBe(true);
    // The accepted heartbeat and the refused one, each an event of its own.
    expect(beats).toEqual([`accepted 1 ${oldCtx.claimToken}`, `refused heartbeat 1 ${oldCtx.claimToken}`]);
    expect(await heartbeat(oldCtx.claimToken, { db: t.db })).toBe(false);
    let workRan = false;
    expect(
      await oldCtx.checkpoint({ cursor: 99 }, () => {
        workRan = true;
      }),
    ).toBe(false);
    expect(workRan).toBe(false);
    release.resolve();
    await oldRun; // its failure is fenced out
    let job = await getJob(id, { db: t.db });
    expect(job).toMatchObject({ status: "running", attempts: 2, progress: null });
    expect(job!.lastError).not.toContain("old run failing late");

    expect(await newCtx.heartbeat()).toBe(true);
    newRelease.resolve();
    await newRun;
    job = await getJob(id, { db: t.db });
    expect(job).toMatchObject({ status: "done", result: "new wins", attempts: 2 });
  });

  it("the old run's success after a takeover is refused as well", async () => {
    const id = await enqueue("contested2", null, { db: t.db, queue: "fence2", maxAttempts: 2 });
    const started = deferred();
    const release = deferred();
    const fenced: string[] = [];
    const oldRun = processOne(
      {
        contested2: async () => {
          started.resolve();
          await release.promise;
          return "stale";
        },
      },
      { db: t.db, queue: "fence2", lease: 60, events: { "job:fenced": (e) => fenced.push(e.write) } },
    );
    await started.promise;
    await reclaim({ db: t.db, lease: 0 });
    release.resolve();
    await oldRun;
    expect(fenced).toEqual(["complete"]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", result: null });
  });
});
