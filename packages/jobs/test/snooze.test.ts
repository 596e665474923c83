import { metrics } from "@opentelemetry/api";
import { AggregationTemporality, MeterProvider, MetricReader, type DataPoint } from "@opentelemetry/sdk-metrics";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createWorker,
  drain,
  enqueue,
  getJob,
  JobError,
  JobSnooze,
  MAX_SNOOZE_SECONDS,
  processOne,
  reclaim,
  snooze,
  type JobContext,
  type Logger,
  type WorkerEvents,
} from "../src/index.js";
import { backends, deferred, type TestDatabase } from "./helpers/backends.js";

class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}
const reader = new TestReader();
beforeAll(() => void metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] })));
afterAll(() => metrics.disable());

async function counter(name: string, queue: string): Promise<number> {
  const { resourceMetrics } = await reader.collect();
  let total = 0;
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      if (metric.descriptor.name !== name) continue;
      for (const point of metric.dataPoints as DataPoint<number>[]) if (point.attributes["forge_jobs.queue"] === queue) total += point.value;
    }
  }
  return total;
}

/** What a rate-limited API client throws: HTTP 429 with Retry-After, told the structural way. */
function tooManyRequests(retryAfter: unknown, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error("429 Too Many Requests"), { snoozeSeconds: retryAfter, ...extra });
}

describe("snooze: the function", () => {
  it("builds an Error with an own snoozeSeconds, and refuses a delay that is not a finite number >= 0", () => {
    const s = snooze(30, "rate limited by the CRM");
    expect(s).toBeInstanceOf(Error);
    expect(s).toBeInstanceOf(JobSnooze);
    expect(Object.hasOwn(s, "snoozeSeconds")).toBe(true);
    expect(s).toMatchObject({ snoozeSeconds: 30, message: "rate limited by the CRM" });
    expect(snooze(0).snoozeSeconds).toBe(0);
    for (const bad of [-1, NaN, Infinity, "30" as unknown as number]) {
      expect(() => snooze(bad)).toThrow(JobError);
    }
    expect(() => snooze(-5)).toThrow("snooze: seconds must be a finite number >= 0, got -5");
  });
});

describe.each(backends())("snooze ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** What the assertions read: through getJob, the public reading. */
  async function row(id: number): Promise<{ status: string; attempts: number; snoozes: number; maxSnoozes: number; claimToken: string | null }> {
    const job = (await getJob(id, { db: t.db }))!;
    const [r] = await t.sql<{ claim_token: string | null }>("SELECT claim_token FROM {all} WHERE id = $1", [id]);
    return { status: job.status, attempts: job.attempts, snoozes: job.snoozes, maxSnoozes: job.maxSnoozes, claimToken: r!.claim_token ?? null };
  }

  /** Seconds from the database's now to the job's run_at. */
  async function secondsUntilRun(id: number): Promise<number> {
    const job = await getJob(id, { db: t.db });
    return (job!.runAt.getTime() - (await t.now()).getTime()) / 1000;
  }

  /** Makes a snoozed job due now instead of waiting for it. */
  const dueNow = (id: number) => t.sql("UPDATE {jobs} SET run_at = updated_at WHERE id = $1", [id]);

  it("a thrown snoozeSeconds: back to pending, due in N s by the database clock, attempt given back, snoozes + 1, not a failure", async () => {
    const queue = "thrown";
    const id = await enqueue("call_api", { n: 1 }, { db: t.db, queue, maxAttempts: 1 });
    const attempts: number[] = [];
    const handlers = {
      call_api: (_p: unknown, ctx: JobContext) => {
        attempts.push(ctx.job.attempt);
        if (attempts.length === 1) throw tooManyRequests(30);
        return "called";
      },
    };
    const failed: unknown[] = [];
    expect(await processOne(handlers, { db: t.db, queue, events: { "job:failed": (e) => failed.push(e) } })).toBe(true);

    expect(await row(id)).toMatchObject({ status: "pending", attempts: 0, snoozes: 1, claimToken: null });
    const job = await getJob(id, { db: t.db });
    expect(job).toMatchObject({ status: "pending", lastError: null });
    const wait = await secondsUntilRun(id);
    expect(wait).toBeGreaterThan(29);
    expect(wait).toBeLessThanOrEqual(30);
    expect(failed).toEqual([]);
    // Not due yet: nothing to run.
    expect(await processOne(handlers, { db: t.db, queue })).toBe(false);

    // maxAttempts 1, and the job still runs again, as attempt 1.
    await dueNow(id);
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(attempts).toEqual([1, 1]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", attempts: 1, result: "called" });
    expect((await row(id)).snoozes).toBe(1);
  });

  it("a returned snooze() snoozes (the error is not stored as a result); a returned plain object with snoozeSeconds is a result", async () => {
    const queue = "returned";
    const snoozing = await enqueue("later", null, { db: t.db, queue });
    const plain = await enqueue("report", null, { db: t.db, queue });
    const handlers = { later: () => snooze(5, "the export is not ready"), report: () => ({ snoozeSeconds: 5, rows: 3 }) };
    expect(await drain(handlers, { db: t.db, queue })).toBe(2);

    expect(await row(snoozing)).toMatchObject({ status: "pending", attempts: 0, snoozes: 1 });
    expect(await getJob(snoozing, { db: t.db })).toMatchObject({ result: null, lastError: null });
    const wait = await secondsUntilRun(snoozing);
    expect(wait).toBeGreaterThan(4);
    expect(wait).toBeLessThanOrEqual(5);
    expect(await getJob(plain, { db: t.db })).toMatchObject({ status: "done", result: { snoozeSeconds: 5, rows: 3 } });
    expect((await row(plain)).snoozes).toBe(0);
  });

  it("snoozeSeconds wins over retryable: false", async () => {
    const queue = "wins";
    const id = await enqueue("api", null, { db: t.db, queue, maxAttempts: 3 });
    await processOne(
      {
        api: () => {
          throw tooManyRequests(10, { retryable: false });
        },
      },
      { db: t.db, queue },
    );
    expect(await row(id)).toMatchObject({ status: "pending", attempts: 0, snoozes: 1 });
  });

  it("maxSnoozes caps it: the snooze past the cap fails the job, saying how often, the cap and how to raise it", async () => {
    const queue = "capped";
    expect((await row(await enqueue("forever", null, { db: t.db, queue: "other" }))).maxSnoozes).toBe(100); // the documented default
    const id = await enqueue("forever", null, { db: t.db, queue, maxAttempts: 5, maxSnoozes: 2 });
    const failed: WorkerEvents["job:failed"][] = [];
    const handlers = { forever: () => snooze(0, "still throttled") };
    const options = { db: t.db, queue, events: { "job:failed": (e: WorkerEvents["job:failed"]) => failed.push(e) } };
    expect(await processOne(handlers, options)).toBe(true);
    expect(await processOne(handlers, options)).toBe(true);
    expect(await row(id)).toMatchObject({ status: "pending", attempts: 0, snoozes: 2 });
    expect(failed).toEqual([]);
    expect(await processOne(handlers, options)).toBe(true);

    expect(await row(id)).toMatchObject({ status: "failed", attempts: 1, snoozes: 2 });
    const job = await getJob(id, { db: t.db });
    expect(job!.lastError).toContain("snoozed 2 times");
    expect(job!.lastError).toContain("maxSnoozes 2");
    expect(job!.lastError).toContain("still throttled");
    expect(job!.lastError).toMatch(/higher maxSnoozes/);
    expect(failed).toHaveLength(1);
    expect(failed[0]!.willRetry).toBe(false);
    // Failed means failed: no further attempt although maxAttempts is 5.
    expect(await processOne(handlers, options)).toBe(false);
  });

  it("maxSnoozes 0: the first snooze fails the job", async () => {
    const queue = "capped0";
    const id = await enqueue("never", null, { db: t.db, queue, maxSnoozes: 0 });
    await processOne({ never: () => snooze(1) }, { db: t.db, queue });
    expect(await row(id)).toMatchObject({ status: "failed", snoozes: 0 });
    expect((await getJob(id, { db: t.db }))!.lastError).toContain("snoozed 0 times, its cap (maxSnoozes 0)");
  });

  it("invalid snoozeSeconds (NaN, negative, Infinity, not a number) is an ordinary error, and the recorded error says why", async () => {
    const queue = "invalid";
    const cases: [unknown, string][] = [
      [NaN, "got NaN"],
      [-3, "got -3"],
      [Infinity, "got Infinity"],
      ["30", 'got the string "30"'],
      [null, "got null"],
    ];
    for (const [value, why] of cases) {
      const id = await enqueue("bad_snooze", null, { db: t.db, queue, maxAttempts: 1 });
      await processOne(
        {
          bad_snooze: () => {
            throw tooManyRequests(value);
          },
        },
        { db: t.db, queue },
      );
      expect(await row(id)).toMatchObject({ status: "failed", attempts: 1, snoozes: 0 });
      const lastError = (await getJob(id, { db: t.db }))!.lastError!;
      expect(lastError).toContain(`not snoozed: snoozeSeconds must be a finite number >= 0, ${why}`);
      expect(lastError).toContain("429 Too Many Requests");
    }
    // With attempts left, an invalid snooze is retried with the usual backoff, like any error.
    const retried = await enqueue("bad_snooze", null, { db: t.db, queue, maxAttempts: 2 });
    await processOne(
      {
        bad_snooze: () => {
          throw tooManyRequests(-1);
        },
      },
      { db: t.db, queue },
    );
    expect(await row(retried)).toMatchObject({ status: "pending", attempts: 1, snoozes: 0 });
    expect(Math.round(await secondsUntilRun(retried))).toBe(10);
  });

  it("a delay over MAX_SNOOZE_SECONDS is shortened to it", async () => {
    const queue = "huge";
    const id = await enqueue("far", null, { db: t.db, queue });
    await processOne(
      {
        far: () => {
          throw tooManyRequests(1e12);
        },
      },
      { db: t.db, queue },
    );
    expect(await row(id)).toMatchObject({ status: "pending", snoozes: 1 });
    const wait = await secondsUntilRun(id);
    expect(wait).toBeGreaterThan(MAX_SNOOZE_SECONDS - 5);
    expect(wait).toBeLessThanOrEqual(MAX_SNOOZE_SECONDS);
  });

  it("a snoozed job under a concurrency limit frees its slot: the key's next job runs while it waits", async () => {
    const queue = "limited";
    const key = `crm:${backend.name}`;
    await t.sql(`INSERT INTO ${t.db.limitsTable} (limit_key, concurrency) VALUES ($1, 1)`, [key]);
    const first = await enqueue("crm", 1, { db: t.db, queue, concurrencyKey: key, group: "org:1" });
    const second = await enqueue("crm", 2, { db: t.db, queue, concurrencyKey: key, group: "org:2" });
    const ran: number[] = [];
    const handlers = {
      crm: (n: number) => {
        ran.push(n);
        if (n === 1) return snooze(60, "CRM rate limit");
        return "synced";
      },
    };
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(await row(first)).toMatchObject({ status: "pending", snoozes: 1, attempts: 0 });
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(ran).toEqual([1, 2]);
    expect(await row(second)).toMatchObject({ status: "done" });
    expect(await processOne(handlers, { db: t.db, queue })).toBe(false); // the snoozed one is not due
  });

  it("drain snoozes every job it runs and stops when none is due", async () => {
    const queue = "drained";
    const ids = [await enqueue("wait", 1, { db: t.db, queue }), await enqueue("wait", 2, { db: t.db, queue })];
    const snoozed: WorkerEvents["job:snoozed"][] = [];
    expect(await drain({ wait: () => snooze(60) }, { db: t.db, queue, events: { "job:snoozed": (e) => snoozed.push(e) } })).toBe(2);
    for (const id of ids) expect(await row(id)).toMatchObject({ status: "pending", attempts: 0, snoozes: 1 });
    expect(snoozed.map((e) => [e.job.id, e.snoozeSeconds, e.snoozes])).toEqual(ids.map((id) => [id, 60, 1]));
  });

  it("runWorker: a job snoozed for 0 s runs again at once, without waiting for a poll", async () => {
    const queue = `now-${backend.name}`;
    await enqueue("again", null, { db: t.db, queue });
    let runs = 0;
    const done = deferred();
    const ac = new AbortController();
    // A poll interval longer than the test's timeout: only the worker's own wake-up can bring the job back.
    const worker = createWorker({ again: () => (++runs === 1 ? snooze(0) : done.resolve()) }, { db: t.db, queue, pollInterval: 600, signal: ac.signal });
    const running = worker.run();
    await done.promise;
    ac.abort();
    await running;
    expect(runs).toBe(2);
  });

  it("runWorker: a snoozed job comes back, runs again as the same attempt, with the job:snoozed event, an info log line and the metric", async () => {
    const queue = `worker-${backend.name}`;
    const id = await enqueue("flaky_api", null, { db: t.db, queue, maxAttempts: 1 });
    const runs: number[] = [];
    const snoozed: WorkerEvents["job:snoozed"][] = [];
    const lines: { level: string; msg: string | undefined }[] = [];
    const logger = Object.fromEntries(
      (["debug", "info", "warn", "error"] as const).map((level) => [level, (_fields: object, msg?: string) => lines.push({ level, msg })]),
    ) as unknown as Logger;
    const done = deferred();
    const ac = new AbortController();
    const worker = createWorker(
      {
        flaky_api: (_p, ctx: JobContext) => {
          runs.push(ctx.job.attempt);
          if (runs.length < 3) throw tooManyRequests(0.05);
          return "ok";
        },
      },
      { db: t.db, queue, pollInterval: 0.05, signal: ac.signal, logger },
    );
    worker.on("job:snoozed", (e) => snoozed.push(e));
    worker.on("job:succeeded", () => done.resolve());
    const running = worker.run();
    await done.promise;
    ac.abort();
    await running;

    expect(runs).toEqual([1, 1, 1]);
    expect(snoozed.map((e) => [e.job.id, e.snoozeSeconds, e.snoozes])).toEqual([
      [id, 0.05, 1],
      [id, 0.05, 2],
    ]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", attempts: 1, lastError: null });
    expect((await row(id)).snoozes).toBe(2);
    const snoozeLines = lines.filter((l) => l.msg?.includes("snoozed"));
    expect(snoozeLines).toHaveLength(2);
    expect(snoozeLines[0]!.level).toBe("info");
    expect(lines.filter((l) => l.level === "warn" || l.level === "error")).toEqual([]);
    expect(await counter("forge_jobs.snoozed", queue)).toBe(2);
    expect(await counter("forge_jobs.failed", queue)).toBe(0);
  });

  it("a fenced snooze writes nothing: the job was taken over while the old run was deciding", async () => {
    const queue = "fenced";
    const id = await enqueue("contested", null, { db: t.db, queue, maxAttempts: 3 });
    const started = deferred();
    const release = deferred();
    const fenced: string[] = [];
    const snoozed: unknown[] = [];
    const oldRun = processOne(
      {
        contested: async () => {
          started.resolve();
          await release.promise;
          throw tooManyRequests(120);
        },
      },
      {
        db: t.db,
        queue,
        lease: 60,
        events: { "job:fenced": (e) => fenced.push(e.write), "job:snoozed": (e) => snoozed.push(e) },
      },
    );
    await started.promise;
    // Forced takeover: back to pending, then claimed by a new run that holds it.
    await reclaim({ db: t.db, lease: 0, queue });
    const newStarted = deferred();
    const newRelease = deferred();
    const newRun = processOne(
      {
        contested: async () => {
          newStarted.resolve();
          await newRelease.promise;
          return "new run";
        },
      },
      { db: t.db, queue, lease: 60 },
    );
    await newStarted.promise;
    const before = await t.sql("SELECT status, attempts, snoozes, run_at, claim_token, last_error FROM {jobs} WHERE id = $1", [id]);

    release.resolve();
    await oldRun;
    expect(await t.sql("SELECT status, attempts, snoozes, run_at, claim_token, last_error FROM {jobs} WHERE id = $1", [id])).toEqual(before);
    expect(fenced).toEqual(["snooze"]);
    expect(snoozed).toEqual([]);

    newRelease.resolve();
    await newRun;
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: "new run" });
    expect((await row(id)).snoozes).toBe(0);
  });
});
