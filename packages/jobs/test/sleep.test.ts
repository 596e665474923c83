import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorker, drain, enqueue, getJob, JobError, JobsDatabase, processOne, reclaim, setLimit, type JobContext } from "../src/index.js";
import type { Executor } from "../src/db/executor.js";
import { writeSleep } from "../src/run/sleep.js";
import { backends, deferred, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("durable sleep: ctx.sleep and ctx.sleepUntil ($name)", (backend) => {
  let t: TestDatabase;
  let steps: string;
  beforeAll(async () => {
    t = await backend.create();
    steps = t.tableName("jobs_steps");
  });
  afterAll(() => t.close());

  /** Moves a sleeping job's wake time (and the job's run_at) into the past: "time passes". */
  async function wakeNow(id: number): Promise<void> {
    const past = t.db.sql.nowPlus("1", "-");
    await t.sql(`UPDATE ${steps} SET wake_at = ${past} WHERE job_id = $1 AND kind = 'sleep'`, [id]);
    await t.sql(`UPDATE {jobs} SET run_at = ${past} WHERE id = $1`, [id]);
  }

  async function secondsUntilRun(id: number): Promise<number> {
    const [row] = await t.sql<{ s: number | string }>(
      backend.name === "postgres"
        ? `SELECT extract(epoch FROM run_at - now())::float8 AS s FROM {jobs} WHERE id = $1`
        : backend.name === "sqlite"
          ? `SELECT (run_at - ${t.db.sql.now}) / 1000.0 AS s FROM {jobs} WHERE id = $1`
          : `SELECT TIMESTAMPDIFF(MICROSECOND, ${t.db.sql.now}, run_at) / 1000000 AS s FROM {jobs} WHERE id = $1`,
      [id],
    );
    return Number(row!.s);
  }

  it("ends the run without using an attempt, due at its wake time; the resumed run answers the earlier steps from storage", async () => {
    const q = "nap";
    const id = await enqueue("nap", null, { db: t.db, queue: q, maxAttempts: 1 });
    const ran: string[] = [];
    const handler = async (_p: unknown, ctx: JobContext) => {
      const a = await ctx.step("one", () => (ran.push("one"), "a"));
      await ctx.sleep("nap", 3600);
      ran.push("after nap");
      const b = await ctx.step("two", () => (ran.push("two"), "b"));
      return a + b;
    };
    expect(await processOne({ nap: handler }, { db: t.db, queue: q })).toBe(true);
    expect(ran).toEqual(["one"]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0, snoozes: 0, lastError: null });
    const left = await secondsUntilRun(id);
    expect(left).toBeGreaterThan(3500);
    expect(left).toBeLessThanOrEqual(3600);
    // Not due: nothing to run.
    expect(await processOne({ nap: handler }, { db: t.db, queue: q })).toBe(false);
    await wakeNow(id);
    expect(await processOne({ nap: handler }, { db: t.db, queue: q })).toBe(true);
    expect(ran).toEqual(["one", "after nap", "two"]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", attempts: 1, snoozes: 0, result: "ab" });
  });

  it("frees the worker's slot: with concurrency 1, another job runs while the first sleeps", async () => {
    const q = "slot";
    const sleeper = await enqueue("sleeper", null, { db: t.db, queue: q });
    const other = await enqueue("other", null, { db: t.db, queue: q });
    const done = deferred<number>();
    const stop = new AbortController();
    const worker = createWorker(
      {
        sleeper: async (_p: unknown, ctx: JobContext) => {
          await ctx.sleep("long", 7 * 86_400);
        },
        other: () => "ran",
      },
      { db: t.db, queue: q, concurrency: 1, signal: stop.signal },
    );
    const slept: number[] = [];
    worker.on("job:slept", (e) => slept.push(e.job.id));
    worker.on("job:succeeded", (e) => done.resolve(e.job.id));
    const running = worker.run();
    expect(await done.promise).toBe(other);
    stop.abort();
    await running;
    expect(slept).toEqual([sleeper]);
    expect(await getJob(sleeper, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("uses no attempt: a job with maxAttempts 1 sleeps three times (0 s: due at once) and still succeeds", async () => {
    const q = "zero";
    const id = await enqueue("thrice", null, { db: t.db, queue: q, maxAttempts: 1, maxSnoozes: 0 });
    let runs = 0;
    const n = await drain(
      {
        thrice: async (_p: unknown, ctx: JobContext) => {
          runs++;
          for (const name of ["a", "b", "c"]) await ctx.sleep(name, 0);
          return runs;
        },
      },
      { db: t.db, queue: q },
    );
    expect(n).toBe(4);
    // Sleeps do not count toward maxSnoozes (0 here): they are the job's plan, not a "not now".
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", attempts: 1, snoozes: 0, result: 4 });
  });

  it("sleepUntil: a future date is the wake time, a past one ends the run once; the database clock decides", async () => {
    const q = "until";
    const id = await enqueue("until", null, { db: t.db, queue: q });
    const now = await t.now();
    const target = new Date(now.getTime() + 2 * 3600_000);
    let past = 0;
    const handler = async (_p: unknown, ctx: JobContext) => {
      await ctx.sleepUntil("past", new Date(now.getTime() - 60_000));
      past++;
      await ctx.sleepUntil("later", target);
      return "woke";
    };
    await processOne({ until: handler }, { db: t.db, queue: q });
    await processOne({ until: handler }, { db: t.db, queue: q });
    expect(past).toBe(1);
    const job = await getJob(id, { db: t.db });
    expect(job).toMatchObject({ status: "pending", attempts: 0 });
    expect(Math.abs(job!.runAt.getTime() - target.getTime())).toBeLessThan(2);
    await wakeNow(id);
    await processOne({ until: handler }, { db: t.db, queue: q });
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: "woke" });
  });

  it("a handler that catches the sleep still sleeps, and a step after it in the same run is refused", async () => {
    const q = "caught";
    const id = await enqueue("caught", null, { db: t.db, queue: q });
    let refused: unknown;
    await processOne(
      {
        caught: async (_p: unknown, ctx: JobContext) => {
          await ctx.sleep("nap", 600).catch(() => undefined);
          refused = await ctx.step("next", () => 1).catch((e: unknown) => e);
          return "returned anyway";
        },
      },
      { db: t.db, queue: q },
    );
    expect(refused).toBeInstanceOf(JobError);
    expect((refused as Error).message).toMatch(/ctx\.step\("next"\) after ctx\.sleep\("nap"\) in the same run: the sleep ends the run/);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0, result: null });
  });

  it("refuses bad arguments with clear errors and writes nothing", async () => {
    const q = "bad-sleep";
    const id = await enqueue("bad", null, { db: t.db, queue: q });
    const errors: unknown[] = [];
    await processOne(
      {
        bad: async (_p: unknown, ctx: JobContext) => {
          for (const call of [
            () => ctx.sleep("neg", -1),
            () => ctx.sleep("nan", Number.NaN),
            () => ctx.sleep("long", 400 * 86_400),
            () => ctx.sleepUntil("bad-date", new Date("nope")),
            () => ctx.sleep("", 1),
          ]) {
            errors.push(await call().catch((e: unknown) => e));
          }
        },
      },
      { db: t.db, queue: q },
    );
    expect(errors.map((e) => (e as Error).message)).toEqual([
      'ctx.sleep("neg", seconds): seconds must be a finite number from 0 to 31622400 (366 days), got -1',
      'ctx.sleep("nan", seconds): seconds must be a finite number from 0 to 31622400 (366 days), got NaN',
      'ctx.sleep("long", seconds): seconds must be a finite number from 0 to 31622400 (366 days), got 34560000',
      'ctx.sleepUntil("bad-date", date): date must be a valid Date, got Invalid Date',
      'ctx.sleep: name must be a non-empty string of at most 255 characters, got ""',
    ]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done" });
    expect(await t.sql(`SELECT name FROM ${steps} WHERE job_id = $1`, [id])).toEqual([]);
  });

  it("a resumed run is claimed as any other: its concurrency key's limit holds it back while the key is full", async () => {
    const q = "limited";
    await setLimit("sleepy-key", { concurrency: 1 }, { db: t.db });
    const sleeper = await enqueue("sleeper", null, { db: t.db, queue: q, concurrencyKey: "sleepy-key" });
    const handlers = {
      sleeper: async (_p: unknown, ctx: JobContext) => {
        await ctx.sleep("nap", 3600);
        return "woke";
      },
    };
    await processOne(handlers, { db: t.db, queue: q });
    await enqueue("busy", null, { db: t.db, queue: q, concurrencyKey: "sleepy-key" });
    const running = deferred();
    const release = deferred();
    const holding = processOne(
      {
        busy: async () => {
          running.resolve();
          await release.promise;
        },
      },
      { db: t.db, queue: q },
    );
    await running.promise;
    await wakeNow(sleeper);
    // Due, but its key is full: not claimed.
    expect(await processOne(handlers, { db: t.db, queue: q })).toBe(false);
    release.resolve();
    await holding;
    expect(await processOne(handlers, { db: t.db, queue: q })).toBe(true);
    expect(await getJob(sleeper, { db: t.db })).toMatchObject({ status: "done", result: "woke" });
  });

  it("a job that uses no step sends no statement about steps", async () => {
    const real = t.db.executor;
    const texts: string[] = [];
    // No worker view of its own (SQLite's): the worker's statements go through this one.
    const counting: Executor = Object.create(real, {
      forWorker: { value: undefined },
      query: {
        value: ((sql: string, ...rest: unknown[]) => (texts.push(sql), (real.query as (...a: unknown[]) => unknown)(sql, ...rest))) as Executor["query"],
      },
      transaction: {
        value: ((fn: (tx: Executor) => Promise<unknown>, options?: unknown) =>
          real.transaction(
            (tx) =>
              fn(
                Object.create(tx, {
                  query: {
                    value: ((sql: string, ...rest: unknown[]) => (
                      texts.push(sql),
                      (tx.query as (...a: unknown[]) => unknown)(sql, ...rest)
                    )) as Executor["query"],
                  },
                }),
              ),
            options as never,
          )) as Executor["transaction"],
      },
    });
    const db = new JobsDatabase(counting, t.db.settings);
    const q = "plain";
    await enqueue("plain", null, { db: t.db, queue: q });
    expect(await processOne({ plain: () => "ok" }, { db, queue: q })).toBe(true);
    expect(texts.length).toBeGreaterThan(0);
    expect(texts.filter((s) => s.includes("jobs_steps"))).toEqual([]);
  });
  it("refuses the sleep of a run whose job was taken over: the job stays with its new owner, no sleep step saved", async () => {
    const q = "stale-sleep";
    const id = await enqueue("stale", null, { db: t.db, queue: q, maxAttempts: 3 });
    const started = deferred();
    const release = deferred();
    const fenced: string[] = [];
    const slept: number[] = [];
    const run = processOne(
      {
        stale: async (_p: unknown, ctx: JobContext) => {
          started.resolve();
          await release.promise;
          await ctx.sleep("nap", 3600);
        },
      },
      { db: t.db, queue: q, lease: 60, events: { "job:fenced": (e) => fenced.push(e.write), "job:slept": (e) => slept.push(e.job.id) } },
    );
    await started.promise;
    await reclaim({ db: t.db, lease: 0, queue: q });
    release.resolve();
    await run;
    expect(fenced).toEqual(["sleep"]);
    expect(slept).toEqual([]);
    // Back in the queue by the reclaim, due now: not pushed an hour away by the stale run.
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 1 });
    expect(await t.sql(`SELECT name FROM ${steps} WHERE job_id = $1`, [id])).toEqual([]);
  });
  it("a sleep written again (a retry after a lost reply) answers 'not ours': its fenced insert finds no running job, so never meets the saved step's key", async () => {
    const q = "sleep-twice";
    const id = await enqueue("twice", null, { db: t.db, queue: q });
    const answers: unknown[] = [];
    await processOne(
      {
        twice: async (_p: unknown, ctx: JobContext) => {
          const run = { id: ctx.job.id, token: ctx.claimToken };
          for (let i = 0; i < 2; i++) answers.push(await writeSleep(t.db, run, { name: "nap", wake: { in: 3600 } }).catch((e: unknown) => e));
        },
      },
      { db: t.db, queue: q },
    );
    expect(answers).toEqual([true, false]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });
  });
});
