// Priority aging (issue 36.10): `priorityAging: { everySeconds, max }` lifts a pending job's stored
// priority one step per everySeconds it waited (database clock, from its run_at), up to max, in
// the workers' sweep (or agePriorities()). A low-priority job under a constant stream of higher
// ones runs within a bound; without aging it starves. Time is moved by backdating run_at, so
// each tick below is one second of waiting without sleeping.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agePriorities, connect, enqueue, enqueueMany, getJob, JobError, processOne, runWorker, type JobsDatabase } from "../src/index.js";
import { agingReadSql } from "../src/maintenance/age-priorities.js";
import { backends, uniqueName, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("priority aging ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** Moves a job's run_at `seconds` into the past: as if it had waited that much longer. */
  const backdate = async (id: number, seconds: number) => {
    const minus = { postgres: "run_at - make_interval(secs => $1)", sqlite: "run_at - $1 * 1000", mysql: "run_at - INTERVAL $1 SECOND" }[backend.name];
    await t.sql(`UPDATE {jobs} SET run_at = ${minus} WHERE id = $2`, [seconds, id]);
  };
  const priorityOf = async (id: number) => (await getJob(id, { db: t.db }))?.priority;
  const agingOf = async (id: number) =>
    (
      await t.sql<{ aging_base: unknown; aging_every: unknown; aging_max: unknown }>(`SELECT aging_base, aging_every, aging_max FROM {jobs} WHERE id = $1`, [
        id,
      ])
    )[0];

  /**
   * A constant stream: each tick one second passes for the low job, two high jobs (priority 3)
   * arrive, a sweep runs and the worker takes one job. Returns the tick the low job ran at, or
   * null if it did not run in `ticks` (high jobs were waiting all along: the stream outran it).
   */
  async function stream(queue: string, lowId: number, ticks: number): Promise<number | null> {
    const ran: number[] = [];
    const handlers = { low: () => void ran.push(lowId), high: () => {} };
    for (let tick = 1; tick <= ticks; tick += 1) {
      await backdate(lowId, 1);
      await enqueue("high", {}, { db: t.db, queue, priority: 3 });
      await enqueue("high", {}, { db: t.db, queue, priority: 3 });
      await agePriorities({ db: t.db });
      expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
      if (ran.length > 0) return tick;
    }
    return null;
  }

  it("a low job under a constant stream of higher ones runs within its bound with aging", async () => {
    const queue = uniqueName("q");
    await enqueue("high", {}, { db: t.db, queue, priority: 3 });
    const low = await enqueue("low", {}, { db: t.db, queue, priority: 0, priorityAging: { everySeconds: 1, max: 5 } });
    // Priority 3 after 3 s: equal to the stream's, and the older id comes first.
    expect(await stream(queue, low, 10)).toBe(3);
    expect((await getJob(low, { db: t.db }))?.status).toBe("done");
    // It ran ahead of high jobs still waiting.
    const [row] = await t.sql<{ n: unknown }>(`SELECT count(*) AS n FROM {jobs} WHERE queue = $1 AND status = 'pending' AND task = 'high'`, [queue]);
    expect(Number(row?.n)).toBeGreaterThan(0);
  });

  it("without aging the same stream starves it", async () => {
    const queue = uniqueName("q");
    await enqueue("high", {}, { db: t.db, queue, priority: 3 });
    const low = await enqueue("low", {}, { db: t.db, queue, priority: 0 });
    expect(await stream(queue, low, 10)).toBeNull();
    expect(await priorityOf(low)).toBe(0);
    expect((await getJob(low, { db: t.db }))?.status).toBe("pending");
  });

  it("the raise is capped at max, and max defaults to PRIORITY_HIGH", async () => {
    const queue = uniqueName("q");
    const capped = await enqueue("t", {}, { db: t.db, queue, priority: -10, priorityAging: { everySeconds: 60, max: 2 } });
    const byDefault = await enqueue("t", {}, { db: t.db, queue, priority: -10, priorityAging: { everySeconds: 1 } });
    const stepped = await enqueue("t", {}, { db: t.db, queue, priority: -10, priorityAging: { everySeconds: 60 } });
    await backdate(capped, 100_000);
    await backdate(byDefault, 100_000);
    await backdate(stepped, 150);
    await agePriorities({ db: t.db });
    expect([await priorityOf(capped), await priorityOf(byDefault), await priorityOf(stepped)]).toEqual([2, 10, -8]);
    expect(await agingOf(byDefault)).toMatchObject({ aging_max: 10 });
    // A second pass changes nothing.
    expect(await agePriorities({ db: t.db })).toBe(0);
  });

  it("the claim order stays priority, then id", async () => {
    const queue = uniqueName("q");
    const aged = await enqueue("t", { n: "aged" }, { db: t.db, queue, priority: 0, priorityAging: { everySeconds: 1, max: 9 } });
    const b = await enqueue("t", { n: "b" }, { db: t.db, queue, priority: 2 });
    const c = await enqueue("t", { n: "c" }, { db: t.db, queue, priority: 2 });
    const d = await enqueue("t", { n: "d" }, { db: t.db, queue, priority: 3 });
    await backdate(aged, 2);
    await agePriorities({ db: t.db });
    const order: number[] = [];
    const handlers = { t: (_payload: unknown, ctx: { job: { id: number } }) => void order.push(ctx.job.id) };
    while (await processOne(handlers, { db: t.db, queue }));
    expect(order).toEqual([d, aged, b, c]);
    // A job that ran keeps the priority it had reached.
    expect(await priorityOf(aged)).toBe(2);
  });

  it("a job without aging is untouched: no aging columns, no change by the sweep", async () => {
    const queue = uniqueName("q");
    const plain = await enqueue("t", {}, { db: t.db, queue, priority: -5 });
    await backdate(plain, 100_000);
    await agePriorities({ db: t.db });
    expect(await priorityOf(plain)).toBe(-5);
    expect(await agingOf(plain)).toEqual({ aging_base: null, aging_every: null, aging_max: null });
  });

  it("a retried job ages again from its base, counted from its retry's run_at", async () => {
    const queue = uniqueName("q");
    const id = await enqueue("fails", {}, { db: t.db, queue, priority: 0, maxAttempts: 2, priorityAging: { everySeconds: 1, max: 8 } });
    await backdate(id, 4);
    await agePriorities({ db: t.db });
    expect(await priorityOf(id)).toBe(4);
    const handlers = {
      fails: () => {
        throw new Error("again later");
      },
    };
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect((await getJob(id, { db: t.db }))?.status).toBe("pending");
    // Its backoff: run_at is ahead, so it has earned nothing yet.
    await agePriorities({ db: t.db });
    expect(await priorityOf(id)).toBe(0);
  });

  it("a worker's sweep ages jobs (sweepInterval)", async () => {
    const queue = uniqueName("q");
    const id = await enqueue("t", {}, { db: t.db, queue, priority: 0, priorityAging: { everySeconds: 1, max: 5 } });
    await backdate(id, 3);
    const controller = new AbortController();
    // The worker serves another queue: the sweep is for every queue, the job stays pending.
    const worker = runWorker({}, { db: t.db, queue: uniqueName("other"), sweepInterval: 0.05, pollInterval: 0.05, signal: controller.signal });
    try {
      await waitFor("the sweep's raise", async () => (await priorityOf(id)) === 3);
    } finally {
      controller.abort();
      await worker;
    }
  });

  it("a queue's jobDefaults age its jobs; priorityAging: null opts out; a job at its max gets none", async () => {
    const queue = uniqueName("q");
    const db: JobsDatabase = connect(t.url, { schema: t.schema, jobDefaults: { queues: { [queue]: { priorityAging: { everySeconds: 30, max: 4 } } } } });
    try {
      const aged = await enqueue("t", {}, { db, queue });
      const optedOut = await enqueue("t", {}, { db, queue, priorityAging: null });
      const atMax = await enqueue("t", {}, { db, queue, priority: 4 });
      expect(await agingOf(aged)).toEqual({ aging_base: 0, aging_every: 30, aging_max: 4 });
      expect(await agingOf(optedOut)).toEqual({ aging_base: null, aging_every: null, aging_max: null });
      expect(await agingOf(atMax)).toEqual({ aging_base: null, aging_every: null, aging_max: null });
    } finally {
      await db.close();
    }
  });

  it("enqueueMany mixes aging and plain jobs, also in chunks at SQLite's parameter limit", async () => {
    const queue = uniqueName("q");
    const items = Array.from({ length: 4000 }, (_, i) => ({ task: "t", payload: { i }, ...(i % 2 === 0 ? { priorityAging: { everySeconds: 5 } } : {}) }));
    const ids = await enqueueMany(items, { db: t.db, queue });
    expect(ids).toHaveLength(4000);
    expect(await agingOf(ids[0]!)).toEqual({ aging_base: 0, aging_every: 5, aging_max: 10 });
    expect(await agingOf(ids[3999]!)).toEqual({ aging_base: null, aging_every: null, aging_max: null });
    const [row] = await t.sql<{ n: unknown }>(`SELECT count(*) AS n FROM {jobs} WHERE queue = $1 AND aging_every IS NOT NULL`, [queue]);
    expect(Number(row?.n)).toBe(2000);
    await t.sql(`DELETE FROM {jobs} WHERE queue = $1`, [queue]);
  });

  it("the sweep's read goes through jobs_aging, which holds no job without aging", async () => {
    const queue = uniqueName("q");
    await enqueueMany(
      Array.from({ length: 3000 }, (_, i) => ({ task: "t", payload: { i } })),
      { db: t.db, queue },
    );
    await t.sql(backend.name === "mysql" ? "ANALYZE TABLE {jobs}" : "ANALYZE {jobs}");
    const sql = agingReadSql(t.db);
    const plan =
      backend.name === "postgres"
        ? (await t.db.executor.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, [])).rows.map((r) => r["QUERY PLAN"]).join("\n")
        : backend.name === "sqlite"
          ? (await t.db.executor.query<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, [])).rows.map((r) => r.detail).join("\n")
          : (await t.db.executor.query<{ key: string | null }>(`EXPLAIN ${sql}`, [])).rows.map((r) => String(r.key)).join("\n");
    expect(plan).toMatch(/jobs_aging/);
    expect(await agePriorities({ db: t.db })).toBe(0);
    await t.sql(`DELETE FROM {jobs} WHERE queue = $1`, [queue]);
  });

  it("bad input is a JobError and writes nothing", async () => {
    const queue = uniqueName("q");
    const bad: unknown[] = [{ everySeconds: 0 }, { everySeconds: 1.5 }, { everySeconds: 1, max: 0 }, { everySeconds: 1, by: 2 }, 60, {}];
    for (const priorityAging of bad) {
      await expect(enqueue("t", {}, { db: t.db, queue, priority: 0, priorityAging: priorityAging as never })).rejects.toThrow(JobError);
    }
    await expect(enqueue("t", {}, { db: t.db, queue, priorityAging: { everySeconds: 1, max: -1 } })).rejects.toThrow(/above the job's priority/);
    expect(() => connect(t.url, { schema: t.schema, jobDefaults: { queues: { x: { priorityAging: { everySeconds: -1 } } } } })).toThrow(JobError);
    const [row] = await t.sql<{ n: unknown }>(`SELECT count(*) AS n FROM {jobs} WHERE queue = $1`, [queue]);
    expect(Number(row?.n)).toBe(0);
  });
});
