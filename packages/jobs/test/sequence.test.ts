// Strict order per key (issue 36.3): `sequence` makes the jobs of one key run one at a time, in
// the order their enqueues commit; a failed one holds the rest until retried or cancelled, or
// the key goes on ("continue"). All backends.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cancelJob,
  createWorker,
  drain,
  enqueue,
  enqueueBatch,
  enqueueMany,
  getJob,
  JobError,
  processOne,
  retryJob,
  type Handlers,
  type JobContext,
} from "../src/index.js";
import { backends, uniqueName, waitFor, type TestDatabase } from "./helpers/backends.js";
import { cli } from "./helpers/cli.js";

const permanent = (message: string) => Object.assign(new Error(message), { retryable: false });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Run {
  id: number;
  key: string;
  start: number;
  end: number;
}

describe.each(backends())("sequence ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const status = async (id: number) => (await getJob(id, { db: t.db }))?.status;
  const count = async () => Number((await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all}"))[0]?.n);
  const sequenceRows = async () => Number((await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM ${t.tableName("jobs_sequences")}`))[0]?.n);

  /** Runs `queue` with `workers` in-process workers until `done` jobs have run; the handler records each run. */
  async function runAll(queue: string, expected: number, options: { workers: number; concurrency: number; ms: number }): Promise<Run[]> {
    const runs: Run[] = [];
    const stop = new AbortController();
    const handlers: Handlers = {
      work: async (payload: unknown, ctx: JobContext) => {
        const start = performance.now();
        await sleep(options.ms);
        runs.push({ id: ctx.job.id, key: (payload as { key: string }).key, start, end: performance.now() });
      },
    };
    const workers = Array.from({ length: options.workers }, (_, w) =>
      createWorker(handlers, { db: t.db, queue, concurrency: options.concurrency, pollInterval: 0.02, workerId: `w${w}`, signal: stop.signal }).run(),
    );
    await waitFor(`${expected} runs`, async () => runs.length >= expected, 60_000);
    stop.abort();
    await Promise.all(workers);
    return runs;
  }

  /** Per key: runs in id order (the enqueues' commit order), each after the previous one ended. */
  function expectOrdered(runs: Run[], ids: Map<string, number[]>): void {
    for (const [key, keyIds] of ids) {
      const ofKey = runs.filter((r) => r.key === key).sort((a, b) => a.start - b.start);
      expect(ofKey.map((r) => r.id)).toEqual([...keyIds].sort((a, b) => a - b));
      for (let i = 1; i < ofKey.length; i++) expect(ofKey[i]!.start).toBeGreaterThanOrEqual(ofKey[i - 1]!.end);
    }
  }

  it("20 concurrent producers on one key: 3 workers run its jobs one at a time, in the order the enqueues committed", async () => {
    const queue = uniqueName("producers");
    const key = `${queue}:k`;
    const ids: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, async (_, p) => {
        for (let n = 0; n < 5; n++) ids.push(await enqueue("work", { key, p, n }, { db: t.db, queue, sequence: key }));
      }),
    );
    // Each job but the first depends on the one committed just before it: the chain is the id order.
    const sorted = [...ids].sort((a, b) => a - b);
    const edges = await t.sql<{ job_id: number | string; depends_on_id: number | string }>(
      `SELECT job_id, depends_on_id FROM ${t.db.dependenciesTable} WHERE job_id IN (${sorted.join(", ")}) ORDER BY job_id`,
    );
    expect(edges.map((e) => [Number(e.job_id), Number(e.depends_on_id)])).toEqual(sorted.slice(1).map((id, i) => [id, sorted[i]]));
    expect(await status(sorted[0]!)).toBe("pending");
    expect(await status(sorted[1]!)).toBe("waiting");
    const runs = await runAll(queue, 100, { workers: 3, concurrency: 5, ms: 2 });
    expectOrdered(runs, new Map([[key, ids]]));
    expect(runs).toHaveLength(100);
  });

  it("many keys interleaved run in parallel across keys, in order within each (concurrency 10)", async () => {
    const queue = uniqueName("keys");
    const ids = new Map<string, number[]>();
    for (let n = 0; n < 5; n++) {
      for (let k = 0; k < 10; k++) {
        const key = `${queue}:${k}`;
        ids.set(key, [...(ids.get(key) ?? []), await enqueue("work", { key }, { db: t.db, queue, sequence: key })]);
      }
    }
    const runs = await runAll(queue, 50, { workers: 1, concurrency: 10, ms: 40 });
    expectOrdered(runs, ids);
    // Runs of different keys overlapped: at some instant, several were in flight.
    const most = Math.max(...runs.map((r) => runs.filter((o) => o.start <= r.start && o.end > r.start).length));
    expect(most).toBeGreaterThanOrEqual(5);
  });

  it("enqueueMany chains the items of one key in item order; other keys and plain items are free", async () => {
    const queue = uniqueName("many");
    const ids = await enqueueMany(
      [
        { task: "work", payload: { key: "a" }, sequence: `${queue}:a` },
        { task: "work", payload: { key: "b" }, sequence: { key: `${queue}:b` } },
        { task: "work", payload: { key: "a" }, sequence: `${queue}:a` },
        { task: "work", payload: { key: "-" } },
        { task: "work", payload: { key: "a" }, sequence: { key: `${queue}:a`, onFailure: "continue" } },
      ],
      { db: t.db, queue },
    );
    expect(await Promise.all(ids.map(status))).toEqual(["pending", "pending", "waiting", "pending", "waiting"]);
    expect((await getJob(ids[2]!, { db: t.db }))!.dependsOn).toEqual([ids[0]]);
    expect((await getJob(ids[4]!, { db: t.db }))!.dependsOn).toEqual([ids[2]]);
    // The next call's job follows the call's last item of the key.
    const next = await enqueue("work", { key: "a" }, { db: t.db, queue, sequence: `${queue}:a` });
    expect((await getJob(next, { db: t.db }))!.dependsOn).toEqual([ids[4]]);
    const order: number[] = [];
    expect(await drain({ work: (_p: unknown, ctx: JobContext) => void order.push(ctx.job.id) }, { db: t.db, queue })).toBe(6);
    expect(order.filter((id) => [ids[0], ids[2], ids[4], next].includes(id))).toEqual([ids[0], ids[2], ids[4], next]);
  });

  it("a job whose key's last job ended done or was cancelled is pending at once, with no edge", async () => {
    const queue = uniqueName("ended");
    const key = `${queue}:k`;
    const a = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    await drain({ work: () => null }, { db: t.db, queue });
    const b = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    expect(await getJob(b, { db: t.db })).toMatchObject({ status: "pending", dependsOn: [], waitingFor: null });
    expect(await cancelJob(b, { db: t.db })).toBe(true);
    const c = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    expect(await getJob(c, { db: t.db })).toMatchObject({ status: "pending", dependsOn: [] });
    expect(await status(a)).toBe("done");
  });

  it("a job that failed for good holds the rest (getJob says why); retryJob releases them in order once it succeeds", async () => {
    const queue = uniqueName("hold");
    const key = `${queue}:k`;
    const [a, b, c] = [
      await enqueue("work", { fail: true }, { db: t.db, queue, sequence: key }),
      await enqueue("work", {}, { db: t.db, queue, sequence: key }),
      await enqueue("work", {}, { db: t.db, queue, sequence: key }),
    ] as [number, number, number];
    const order: number[] = [];
    let failing = true;
    const handlers = {
      work: (p: { fail?: boolean }, ctx: JobContext) => {
        order.push(ctx.job.id);
        if (p.fail && failing) throw permanent("no");
      },
    };
    expect(await drain(handlers, { db: t.db, queue })).toBe(1);
    expect(await status(a)).toBe("failed");
    expect(await getJob(b, { db: t.db })).toMatchObject({ status: "waiting", dependsOn: [a], waitingFor: { kind: "dependencies", jobIds: [a], held: [a] } });
    expect(await getJob(c, { db: t.db })).toMatchObject({ status: "waiting", waitingFor: { kind: "dependencies", jobIds: [b], held: [] } });
    // forge-jobs show says the same (it once printed getJobSteps' waitingFor over getJob's: null).
    const shown = await cli(["show", String(b), "--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ status: "waiting", steps: [], waitingFor: { kind: "dependencies", jobIds: [a], held: [a] } });
    // A job enqueued while the key is held queues behind the rest.
    const d = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    expect(await drain(handlers, { db: t.db, queue })).toBe(0);
    expect(await Promise.all([b, c, d].map(status))).toEqual(["waiting", "waiting", "waiting"]);

    failing = false;
    expect(await retryJob(a, { db: t.db })).toBe(true);
    expect(await status(b)).toBe("waiting");
    expect(await drain(handlers, { db: t.db, queue })).toBe(4);
    expect(order).toEqual([a, a, b, c, d]);
    expect(await Promise.all([a, b, c, d].map(status))).toEqual(["done", "done", "done", "done"]);
  });

  it("a failed job that was the key's last holds the next enqueue; cancelJob of it releases the next job", async () => {
    const queue = uniqueName("skip");
    const key = `${queue}:k`;
    const a = await enqueue("work", { fail: true }, { db: t.db, queue, sequence: key });
    const handlers = { work: (p: { fail?: boolean }) => (p.fail ? Promise.reject(permanent("no")) : null) };
    await drain(handlers, { db: t.db, queue });
    expect(await status(a)).toBe("failed");
    const b = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    const c = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    expect(await getJob(b, { db: t.db })).toMatchObject({ status: "waiting", waitingFor: { kind: "dependencies", jobIds: [a], held: [a] } });

    expect(await cancelJob(a, { db: t.db })).toBe(true);
    expect(await getJob(a, { db: t.db })).toMatchObject({ status: "cancelled", lastError: expect.stringMatching(/no/) as unknown });
    expect(await status(b)).toBe("pending");
    expect(await status(c)).toBe("waiting");
    expect(await drain(handlers, { db: t.db, queue })).toBe(2);
    // Cancelled once: a second cancel, or the cancel of a failed job that holds nothing, changes nothing.
    expect(await cancelJob(a, { db: t.db })).toBe(false);
    const lone = await enqueue("work", { fail: true }, { db: t.db, queue });
    await drain(handlers, { db: t.db, queue });
    expect(await cancelJob(lone, { db: t.db })).toBe(false);
    expect(await status(lone)).toBe("failed");
  });

  it('onFailure "continue" lets the next job run after a failure', async () => {
    const queue = uniqueName("continue");
    const key = `${queue}:k`;
    const sequence = { key, onFailure: "continue" } as const;
    const a = await enqueue("work", { fail: true }, { db: t.db, queue, sequence });
    const b = await enqueue("work", {}, { db: t.db, queue, sequence });
    const handlers = { work: (p: { fail?: boolean }) => (p.fail ? Promise.reject(permanent("no")) : "ok") };
    expect(await drain(handlers, { db: t.db, queue })).toBe(2);
    expect(await Promise.all([a, b].map(status))).toEqual(["failed", "done"]);
    // Enqueued after the failure: runs at once.
    const failedLast = await enqueue("work", { fail: true }, { db: t.db, queue, sequence });
    await drain(handlers, { db: t.db, queue });
    const c = await enqueue("work", {}, { db: t.db, queue, sequence });
    expect(await getJob(c, { db: t.db })).toMatchObject({ status: "pending", dependsOn: [] });
    expect(await status(failedLast)).toBe("failed");
  });

  it("a retrying job holds its successor: the order holds across retries within maxAttempts", async () => {
    const queue = uniqueName("retrying");
    const key = `${queue}:k`;
    const a = await enqueue("work", { flaky: true }, { db: t.db, queue, sequence: key, maxAttempts: 3 });
    const b = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    const order: string[] = [];
    const handlers = {
      work: (p: { flaky?: boolean }, ctx: JobContext) => {
        order.push(`${ctx.job.id}:${ctx.job.attempt}`);
        if (p.flaky && ctx.job.attempt < 3) throw new Error("try again");
      },
    };
    for (let attempt = 1; attempt <= 3; attempt++) {
      expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
      if (attempt < 3) {
        expect(await status(a)).toBe("pending");
        expect(await status(b)).toBe("waiting");
        await t.sql("UPDATE {jobs} SET run_at = updated_at WHERE id = $1", [a]);
      }
    }
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(order).toEqual([`${a}:1`, `${a}:2`, `${a}:3`, `${b}:1`]);
  });

  it('onDependencyFailure "hold" works for dependsOn too', async () => {
    const queue = uniqueName("dep-hold");
    const a = await enqueue("work", { fail: true }, { db: t.db, queue });
    const b = await enqueue("work", {}, { db: t.db, queue, dependsOn: [a], onDependencyFailure: "hold" });
    let failing = true;
    const handlers = { work: (p: { fail?: boolean }) => (p.fail && failing ? Promise.reject(permanent("no")) : null) };
    await drain(handlers, { db: t.db, queue });
    expect(await getJob(b, { db: t.db })).toMatchObject({ status: "waiting", waitingFor: { kind: "dependencies", jobIds: [a], held: [a] } });
    // Enqueued after the failure: it waits too.
    const c = await enqueue("work", {}, { db: t.db, queue, dependsOn: [a], onDependencyFailure: "hold" });
    expect(await status(c)).toBe("waiting");
    failing = false;
    await retryJob(a, { db: t.db });
    expect(await drain(handlers, { db: t.db, queue })).toBe(3);
    expect(await Promise.all([b, c].map(status))).toEqual(["done", "done"]);
  });

  it("cancelling a waiting job of the key drops it from the middle: the next one follows its predecessor", async () => {
    const queue = uniqueName("middle");
    const key = `${queue}:k`;
    const [a, b, c] = [
      await enqueue("work", {}, { db: t.db, queue, sequence: key }),
      await enqueue("work", {}, { db: t.db, queue, sequence: key }),
      await enqueue("work", {}, { db: t.db, queue, sequence: key }),
    ] as [number, number, number];
    expect(await cancelJob(b, { db: t.db })).toBe(true);
    expect(await status(c)).toBe("pending");
    const order: number[] = [];
    expect(await drain({ work: (_p: unknown, ctx: JobContext) => void order.push(ctx.job.id) }, { db: t.db, queue })).toBe(2);
    // c no longer waits for a: both were pending, and run in claim order.
    expect(order).toEqual([a, c]);
  });

  it("a key is shared by all tenants: one whose last job is another tenant's is refused, nothing written", async () => {
    const queue = uniqueName("tenants");
    const key = `${queue}:k`;
    await enqueue("work", {}, { db: t.db, queue, sequence: key, tenant: "org-1" });
    const before = await count();
    await expect(enqueue("work", {}, { db: t.db, queue, sequence: key, tenant: "org-2" })).rejects.toThrow(
      /is used by jobs of another tenant \(keys are shared by all tenants\); include the tenant in the key/,
    );
    await expect(
      enqueueMany(
        [
          { task: "work", sequence: `${key}:2`, tenant: "org-1" },
          { task: "work", sequence: `${key}:2` },
        ],
        { db: t.db, queue },
      ),
    ).rejects.toThrow(/items\[1\]\.sequence: items of one key must have one tenant/);
    expect(await count()).toBe(before);
    expect(await status(await enqueue("work", {}, { db: t.db, queue, sequence: key, tenant: "org-1" }))).toBe("waiting");
  });

  it("a rolled-back enqueue leaves the key as it was", async () => {
    const queue = uniqueName("tx");
    const key = `${queue}:k`;
    const a = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    if (backend.name === "sqlite") {
      await expect(t.withTransaction((bound) => enqueue("work", {}, { db: bound, queue, sequence: key }), "rollback")).rejects.toThrow(
        /after your transaction commits/,
      );
    } else {
      await t.withTransaction((bound) => enqueue("work", {}, { db: bound, queue, sequence: key }), "rollback");
    }
    const b = await enqueue("work", {}, { db: t.db, queue, sequence: key });
    expect((await getJob(b, { db: t.db }))!.dependsOn).toEqual([a]);
  });

  it("a key of 191 characters as the database counts them (emoji are one each) is accepted", async () => {
    const queue = uniqueName("long");
    const key = "😀".repeat(191);
    await enqueue("work", {}, { db: t.db, queue, sequence: key });
    expect(await status(await enqueue("work", {}, { db: t.db, queue, sequence: key }))).toBe("waiting");
  });

  it("bad input is a JobError and writes nothing", async () => {
    const queue = uniqueName("bad");
    const before = await count();
    const keys = await sequenceRows();
    const refused: [unknown, RegExp][] = [
      [{ sequence: "" }, /sequence must be a non-empty string of at most 191 characters, got ""/],
      [{ sequence: "x".repeat(192) }, /sequence must be at most 191 characters, got 192/],
      [{ sequence: { key: "" } }, /sequence\.key must be a non-empty string/],
      [{ sequence: 5 }, /sequence must be a key \(a string\) or \{ key, onFailure\? \}/],
      [{ sequence: { key: "k", onFailure: "skip" } }, /sequence\.onFailure must be "hold" or "continue", got "skip"/],
      [{ sequence: { key: "k", order: 1 } }, /unknown option "order"/],
      [{ sequence: "k", dependsOn: [1] }, /sequence cannot be combined with dependsOn/],
      [{ sequence: "k", idempotencyKey: "i" }, /sequence cannot be combined with idempotencyKey/],
      [{ sequence: "k", dedupKey: "d" }, /sequence cannot be combined with dedupKey/],
      [{ sequence: "k", throttle: { key: "t", seconds: 1 } }, /sequence cannot be combined with throttle/],
      [{ sequence: "k", debounce: { key: "d", seconds: 1 } }, /sequence cannot be combined with debounce/],
    ];
    for (const [options, message] of refused) {
      const error = await enqueue("work", {}, { db: t.db, queue, ...(options as object) }).catch((e: unknown) => e);
      expect(error, JSON.stringify(options)).toBeInstanceOf(JobError);
      expect((error as Error).message).toMatch(message);
    }
    await expect(enqueueMany([{ task: "work", sequence: "k", ref: "r" }], { db: t.db, queue })).rejects.toThrow(
      /items\[0\]\.sequence cannot be combined with items\[0\]\.ref/,
    );
    await expect(
      enqueueMany(
        [
          { task: "work", sequence: "k" },
          { task: "work", ref: "r" },
        ],
        { db: t.db, queue },
      ),
    ).rejects.toThrow(/cannot also hold a flow/);
    await expect(enqueueBatch([{ task: "work", sequence: "k" }], { db: t.db, queue })).rejects.toThrow(
      /items\[0\]\.sequence: a batch's items cannot be sequenced/,
    );
    expect(await count()).toBe(before);
    expect(await sequenceRows()).toBe(keys);
  });
});
