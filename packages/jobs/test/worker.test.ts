import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createWorker,
  enqueue,
  enqueueMany,
  getJob,
  JobAbortedError,
  JobError,
  reclaim,
  runWorker,
  snooze,
  type JobContext,
  type WorkerEvents,
} from "../src/index.js";
import { ClaimPlan } from "../src/worker/claim-plan.js";
import { JobsDatabase } from "../src/core/database.js";
import type { Executor } from "../src/db/executor.js";
import { backends, deferred, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("the worker ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("an idle worker picks up a new job by wake-up, long before its poll interval", async () => {
    const ac = new AbortController();
    const started = deferred<number>();
    // With LISTEN the poll interval is irrelevant: make it a minute. Without it, polling is the
    // documented mechanism, so the worker must pick the job up on its next poll.
    const pollInterval = t.db.executor.listen ? 60 : 0.2;
    const worker = createWorker({ ping: () => started.resolve(Date.now()) }, { db: t.db, queue: "wake", pollInterval, signal: ac.signal });
    const idle = deferred();
    worker.on("worker:idle", () => idle.resolve());
    const running = worker.run();
    await idle.promise;
    const enqueuedAt = Date.now();
    await enqueue("ping", null, { db: t.db, queue: "wake" });
    const latency = (await started.promise) - enqueuedAt;
    // LISTEN: far below the minute-long poll. Polling: on the next poll (plus one claim).
    expect(latency).toBeLessThan(t.db.executor.listen ? 5_000 : pollInterval * 1000 + 1_000);
    ac.abort();
    await running;
  });

  it("a wake-up that arrives while a claim is in flight is not lost when that claim comes back empty", async () => {
    // The worker's first claim runs and finds nothing; its answer is held back until the job
    // enqueued meanwhile has woken the worker. That claim could not see the job (it ran first),
    // so only the wake-up can bring it: with a minute-long poll, a lost one leaves it waiting.
    const held = deferred();
    const release = deferred();
    const notified = deferred();
    type Claim = (this: ClaimPlan, ...args: Parameters<ClaimPlan["claim"]>) => ReturnType<ClaimPlan["claim"]>;
    const claim = Object.getOwnPropertyDescriptor(ClaimPlan.prototype, "claim")!.value as Claim;
    let first = true;
    ClaimPlan.prototype.claim = async function (this: ClaimPlan, ...args: Parameters<ClaimPlan["claim"]>) {
      const claimed = await claim.apply(this, args);
      if (first) {
        first = false;
        held.resolve();
        await release.promise;
      }
      return claimed;
    };
    const real = t.db.executor;
    const executor: Executor = Object.assign(Object.create(real) as Executor, {
      forWorker: undefined, // the worker listens through this wrapper, not through its own view
      listen: ((channel, onMessage, onError) =>
        real.listen!(
          channel,
          (payload) => {
            onMessage(payload);
            notified.resolve();
          },
          onError,
        )) as Executor["listen"],
    });
    const db = new JobsDatabase(executor, t.db.settings);
    const ac = new AbortController();
    const started = deferred<"started">();
    const worker = createWorker({ ping: () => started.resolve("started") }, { db, queue: "wake-mid-claim", pollInterval: 60, signal: ac.signal });
    const running = worker.run();
    try {
      await held.promise; // the worker's first claim has run, empty
      await enqueue("ping", null, { db: t.db, queue: "wake-mid-claim" });
      await notified.promise;
      release.resolve();
      const late = new Promise<"still waiting">((r) => setTimeout(() => r("still waiting"), 5_000));
      expect(await Promise.race([started.promise, late])).toBe("started");
    } finally {
      ClaimPlan.prototype.claim = claim;
      release.resolve();
      ac.abort();
      await running;
    }
  });

  it("a worker whose completions are slow to land stops claiming once a full completion batch waits to be written, and catches up when they land", async () => {
    // A database that slows down (a bad plan, a saturated disk) must slow the worker with it.
    // Handlers free their slots before their success is written: without a bound, the worker
    // kept claiming and running while the unwritten successes piled up, each one more lease to
    // extend and one more job to run again if the process died.
    const queue = "slow-completions";
    const jobs = 2_500;
    await enqueueMany(
      Array.from({ length: jobs }, (_, i) => ({ task: "quick", payload: { i } })),
      { db: t.db, queue },
    );
    const release = deferred();
    const real = t.db.executor;
    // The statement that writes successes: it puts the ended rows into history as done.
    const completing = (sql: string) => /'done' AS status/.test(sql);
    const held =
      (query: Executor["query"]): Executor["query"] =>
      async (sql, params, name) => {
        if (completing(sql)) await release.promise;
        return query(sql, params, name);
      };
    const executor: Executor = Object.assign(Object.create(real) as Executor, {
      forWorker: undefined, // the worker writes through this wrapper, not through its own view
      query: held(real.query.bind(real)),
      transaction: ((fn, options) =>
        real.transaction((tx) => fn(Object.assign(Object.create(tx) as Executor, { query: held(tx.query.bind(tx)) })), options)) as Executor["transaction"],
    });
    const db = new JobsDatabase(executor, t.db.settings);
    let ran = 0;
    const ac = new AbortController();
    const running = runWorker({ quick: () => void ran++ }, { db, queue, concurrency: 8, prefetch: 8, signal: ac.signal });
    try {
      await waitFor("1,000 handlers run", async () => ran >= 1_000, 30_000);
      // A bounded observation window, time-based on purpose: it proves an absence (no claims past
      // the bound while the successes wait), and a claim that does not happen sends no signal.
      await new Promise((r) => setTimeout(r, 1_500));
      // At most the bound of unwritten successes, plus the slots and the buffer filled by the last claim.
      expect(ran).toBeLessThanOrEqual(1_000 + 8 + 8);
      release.resolve();
      await waitFor(
        "every job done",
        async () => (await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all} WHERE queue = $1 AND status = 'done'", [queue]))[0]!.n == jobs,
        60_000,
      );
      expect(ran).toBe(jobs);
    } finally {
      release.resolve();
      ac.abort();
      await running;
    }
  }, 120_000);

  it("durations past what a Node timer can hold are capped, not turned into 1 ms: an idle worker stays idle (audit 12.13)", async () => {
    // Counts the statements the worker sends through the real executor.
    let statements = 0;
    const real = t.db.executor;
    const counting: Executor = Object.assign(Object.create(real) as Executor, {
      query: ((sql: string, params?: readonly unknown[], name?: string) => (statements++, real.query(sql, params, name))) as Executor["query"],
      transaction: ((fn, options) => (statements++, real.transaction(fn, options))) as Executor["transaction"],
    });
    const db = new JobsDatabase(counting, t.db.settings);
    const month = 30 * 86_400;
    const ac = new AbortController();
    const worker = createWorker(
      {},
      { db, queue: "idle-month", pollInterval: month, lease: 3 * month, sweepInterval: month, gracePeriod: month, signal: ac.signal },
    );
    const idle = deferred();
    worker.on("worker:idle", () => idle.resolve());
    const running = worker.run();
    await idle.promise;
    const before = statements;
    // A bounded observation window, time-based on purpose: it proves an absence (statements an
    // idle worker does not send), and there is no signal for those.
    await new Promise((r) => setTimeout(r, 500));
    ac.abort();
    await running;
    // Uncapped, each of these timers fired every millisecond: hundreds of claims in 500 ms.
    expect(statements - before).toBeLessThan(5);
  });

  it("a worker stopped while it is still starting closes the connection it was opening to listen (the process can exit)", async () => {
    if (backend.name !== "postgres") return; // LISTEN/NOTIFY is PostgreSQL's
    const listening = async () =>
      Number((await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE $1`, [`LISTEN %${t.db.channel}%`]))[0]!.n);
    expect(await listening()).toBe(0);
    const stop = new AbortController();
    const running = runWorker({}, { db: t.db, queue: "starting", signal: stop.signal });
    setImmediate(() => stop.abort());
    await running;
    // A bounded observation window, time-based on purpose: it proves an absence (a leaked
    // connection would finish opening and LISTEN after the worker returned), with no signal.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await listening()).toBe(0);
  });

  it("runWorker with a bad option returns a rejected promise, never throws synchronously (audit 12.14)", async () => {
    let result: Promise<void> | "threw";
    try {
      result = runWorker({}, { db: t.db, concurrency: 0 });
    } catch {
      result = "threw";
    }
    expect(result).toBeInstanceOf(Promise);
    await expect(result).rejects.toThrow(JobError);
    await expect(runWorker({}, { db: t.db, nope: true } as never)).rejects.toThrow(/nope/);
  });

  it("serves a list of queues", async () => {
    const ac = new AbortController();
    const seen = new Set<string>();
    const worker = createWorker(
      { t: (_p, ctx: JobContext) => void seen.add(ctx.job.queue) },
      { db: t.db, queue: ["qa", "qb"], pollInterval: 0.05, signal: ac.signal },
    );
    const running = worker.run();
    await enqueueMany(
      [
        { task: "t", queue: "qa" },
        { task: "t", queue: "qb" },
        { task: "t", queue: "qc" },
      ],
      { db: t.db },
    );
    await waitFor("both queues served", async () => seen.size === 2);
    ac.abort();
    await running;
    expect([...seen].sort()).toEqual(["qa", "qb"]);
  });

  it("runs up to `concurrency` handlers at once", async () => {
    const ac = new AbortController();
    let now = 0;
    let peak = 0;
    await enqueueMany(
      Array.from({ length: 12 }, () => ({ task: "slow" })),
      { db: t.db, queue: "conc" },
    );
    const finished = deferred();
    let done = 0;
    const worker = createWorker(
      {
        slow: async () => {
          peak = Math.max(peak, ++now);
          await new Promise((r) => setTimeout(r, 30));
          now--;
          if (++done === 12) finished.resolve();
        },
      },
      { db: t.db, queue: "conc", concurrency: 3, pollInterval: 0.05, signal: ac.signal },
    );
    const running = worker.run();
    await finished.promise;
    ac.abort();
    await running;
    expect(peak).toBe(3);
  });

  it("automatic prefetch does not hoard slow jobs: two workers share them (a fixed large prefetch would not)", async () => {
    const share = async (queue: string, prefetch: number | "auto") => {
      await enqueueMany(
        Array.from({ length: 12 }, () => ({ task: "slow" })),
        { db: t.db, queue },
      );
      const ac = new AbortController();
      const ran = { a: 0, b: 0 };
      let done = 0;
      const finished = deferred();
      const worker = (name: "a" | "b") =>
        createWorker(
          {
            slow: async () => {
              await new Promise((r) => setTimeout(r, 60));
              ran[name]++;
              if (++done === 12) finished.resolve();
            },
          },
          { db: t.db, queue, concurrency: 2, prefetch, pollInterval: 0.05, signal: ac.signal },
        ).run();
      const first = worker("a");
      await waitFor(
        "worker a to start",
        async () =>
          done > 0 ||
          ran.a > 0 ||
          (await t
            .sql<{ n: number | string }>("SELECT count(*) AS n FROM {jobs} WHERE queue = $1 AND status = 'running'", [queue])
            .then((r) => Number(r[0]!.n) > 0)),
      );
      const second = worker("b");
      await finished.promise;
      ac.abort();
      await Promise.all([first, second]);
      return ran;
    };
    const auto = await share("share-auto", "auto");
    expect(auto.b).toBeGreaterThanOrEqual(3);
    const hoarded = await share("share-fixed", 250);
    expect(hoarded.b).toBe(0);
  });

  it("after a stall longer than the lease, buffered jobs are confirmed before they run: none runs under a stale claim", async () => {
    const queue = "stall";
    const ids = await enqueueMany(
      [
        { task: "freeze", maxAttempts: 3 },
        { task: "count", maxAttempts: 3 },
        { task: "count", maxAttempts: 3 },
      ],
      { db: t.db, queue },
    );
    const ac = new AbortController();
    const staleRuns: number[] = [];
    let frozen = false;
    const runs = new Map<number, number>();
    let counted = 0;
    const finished = deferred();
    const worker = createWorker(
      {
        freeze: async () => {
          if (frozen) return; // taken back too, it runs again: freeze only once
          frozen = true;
          // Another worker's sweep takes every held job (the two buffered ones too) …
          await reclaim({ db: t.db, lease: 0, queue });
          // … while this process is frozen past its lease (no timer, no extension can run).
          const until = Date.now() + 700;
          while (Date.now() < until);
        },
        count: async (_p, ctx: JobContext) => {
          runs.set(ctx.job.id, (runs.get(ctx.job.id) ?? 0) + 1);
          if (!(await ctx.heartbeat())) staleRuns.push(ctx.job.id);
          else if (++counted === 2) finished.resolve();
        },
      },
      { db: t.db, queue, concurrency: 1, prefetch: 2, lease: 0.5, pollInterval: 0.05, sweepInterval: 0, signal: ac.signal },
    );
    const fenced: string[] = [];
    worker.on("job:fenced", (e) => fenced.push(`${e.job.id}:${e.write}`));
    const running = worker.run();
    await finished.promise;
    ac.abort();
    await running;
    expect(staleRuns).toEqual([]);
    expect([runs.get(ids[1]!), runs.get(ids[2]!)]).toEqual([1, 1]);
    // Whichever comes first finds the buffered jobs taken: their start write or a lease extension.
    for (const id of [ids[1], ids[2]]) expect(fenced.filter((f) => f === `${id}:start` || f === `${id}:heartbeat`)).not.toEqual([]);
  });

  it("graceful shutdown: claims nothing more, lets in-flight jobs finish, hands back the rest without using an attempt", async () => {
    const queue = "graceful";
    const ids = await enqueueMany(
      Array.from({ length: 6 }, (_, i) => ({ task: "work", payload: { i }, maxAttempts: 3 })),
      { db: t.db, queue },
    );
    const ac = new AbortController();
    const started: number[] = [];
    const bothStarted = deferred();
    const release = deferred();
    const worker = createWorker(
      {
        work: async (p: { i: number }) => {
          started.push(p.i);
          if (started.length === 2) bothStarted.resolve();
          await release.promise;
        },
      },
      { db: t.db, queue, concurrency: 2, prefetch: 2, gracePeriod: 30, signal: ac.signal },
    );
    const events: string[] = [];
    worker.on("job:released", (e) => events.push(`released ${e.job.id}`));
    const running = worker.run();
    await bothStarted.promise;
    ac.abort();
    // Stopping: nothing new is claimed, and the two runs may finish.
    await waitFor("the buffered jobs to be handed back", async () => events.length === 2);
    release.resolve();
    await running;
    const jobs = await Promise.all(ids.map(async (id) => (await getJob(id, { db: t.db }))!));
    expect(jobs.filter((j) => j.status === "done")).toHaveLength(2);
    const back = jobs.filter((j) => j.status === "pending");
    expect(back).toHaveLength(4);
    expect(back.every((j) => j.attempts === 0)).toBe(true);
    expect(started).toHaveLength(2);
  });

  it("after the grace period, unfinished jobs are handed back as pending without consuming an attempt, and their signal fires", async () => {
    const queue = "grace-over";
    const id = await enqueue("stuck", null, { db: t.db, queue, maxAttempts: 1 });
    const ac = new AbortController();
    const started = deferred<JobContext>();
    const worker = createWorker(
      {
        stuck: (_p, ctx: JobContext) => {
          started.resolve(ctx);
          return new Promise(() => undefined);
        },
      },
      { db: t.db, queue, gracePeriod: 0.2, signal: ac.signal },
    );
    const running = worker.run();
    const ctx = await started.promise;
    ac.abort();
    await running;
    expect(ctx.signal.aborted).toBe(true);
    expect(ctx.signal.reason).toBeInstanceOf(JobAbortedError);
    expect((ctx.signal.reason as JobAbortedError).reason).toBe("shutdown");
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("emits typed events, and a throwing listener never breaks the worker", async () => {
    const queue = "events";
    const log: string[] = [];
    const ac = new AbortController();
    await enqueueMany([{ task: "ok" }, { task: "bad", maxAttempts: 2 }], { db: t.db, queue });
    const worker = createWorker(
      {
        ok: () => "fine",
        bad: () => {
          throw new Error("nope");
        },
      },
      {
        db: t.db,
        queue,
        signal: ac.signal,
        pollInterval: 0.05,
        events: {
          "job:claimed": () => {
            throw new Error("listener bug");
          },
        },
      },
    );
    const record = <E extends keyof WorkerEvents>(name: E, describe: (e: WorkerEvents[E]) => string) => worker.on(name, (e) => log.push(describe(e)));
    record("job:succeeded", (e) => `succeeded ${e.job.task}`);
    record("job:failed", (e) => `failed ${e.job.task} retry=${e.willRetry} in ${e.retryInSeconds}`);
    record("job:retried", (e) => `retried ${e.job.task} in ${e.retryInSeconds}`);
    record("worker:started", () => "started");
    record("worker:stopped", () => "stopped");
    const running = worker.run();
    await waitFor("both jobs handled", async () => log.filter((l) => l.startsWith("succeeded") || l.startsWith("failed")).length === 2);
    ac.abort();
    await running;
    expect(log).toEqual(expect.arrayContaining(["started", "succeeded ok", "failed bad retry=true in 10", "retried bad in 10", "stopped"]));
    expect(log[0]).toBe("started");
    expect(log.at(-1)).toBe("stopped");
  });

  it("every event of a run carries the run's claim token, which tells apart two runs at the same attempt", async () => {
    const queue = "run-tokens";
    const ac = new AbortController();
    const id = await enqueue("twice", null, { db: t.db, queue });
    const runs: { attempt: number; token: string }[] = [];
    const log: string[] = [];
    const worker = createWorker(
      {
        // The first run snoozes (its attempt given back), so the second one runs at attempt 1 too.
        twice: async (_p, ctx: JobContext) => {
          runs.push({ attempt: ctx.job.attempt, token: ctx.claimToken });
          expect(await ctx.heartbeat()).toBe(true);
          return runs.length === 1 ? snooze(0) : "done";
        },
      },
      { db: t.db, queue, pollInterval: 0.05, signal: ac.signal },
    );
    const record = <E extends "job:claimed" | "job:started" | "job:heartbeat" | "job:snoozed" | "job:succeeded">(name: E) =>
      worker.on(name, (e: WorkerEvents[E]) => log.push(`${name} ${e.job.id}:${e.job.attempt} ${e.claimToken}`));
    for (const name of ["job:claimed", "job:started", "job:heartbeat", "job:snoozed", "job:succeeded"] as const) record(name);
    const running = worker.run();
    await waitFor("the second run to succeed", async () => log.some((l) => l.startsWith("job:succeeded")));
    ac.abort();
    await running;
    expect(runs.map((r) => r.attempt)).toEqual([1, 1]);
    const [first, second] = runs.map((r) => r.token);
    expect(first).not.toBe(second);
    expect(log).toEqual([
      `job:claimed ${id}:1 ${first}`,
      `job:started ${id}:1 ${first}`,
      `job:heartbeat ${id}:1 ${first}`,
      `job:snoozed ${id}:1 ${first}`,
      `job:claimed ${id}:1 ${second}`,
      `job:started ${id}:1 ${second}`,
      `job:heartbeat ${id}:1 ${second}`,
      `job:succeeded ${id}:1 ${second}`,
    ]);
  });
});
