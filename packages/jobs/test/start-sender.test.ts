// Buffered runs start as soon as their start write has left (the write counts their
// attempts; its answer is checked after), but only on a connection heard from lately. A
// failover test caught the gap: the start-write connection had died with the old primary
// unnoticed, the first write after the failover "left" into it, the handlers ran, and their
// attempts were never counted (jobs ended done with 0 attempts). PostgreSQL only: the other
// backends have no pipelined sender.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newRun, type Run } from "../src/worker/run.js";
import { StartWrites } from "../src/worker/start-writes.js";
import { claimJobs, type ClaimedJob } from "../src/run/claim.js";
import type { OrderedSender, QueryResult } from "../src/db/executor.js";
import { createWorker, enqueueMany } from "../src/index.js";
import { backends, deferred, uniqueName, type TestDatabase } from "./helpers/backends.js";

/** A connection that died unnoticed: the write leaves, its answer is a connection error. */
function deadSender(quietForMs: number): OrderedSender & { sends: number } {
  const sender = {
    sends: 0,
    send<R extends object>(): { sent: Promise<void>; result: Promise<QueryResult<R>> } {
      sender.sends++;
      const result = new Promise<QueryResult<R>>((_, reject) =>
        setTimeout(() => reject(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" })), 20),
      );
      result.catch(() => undefined);
      return { sent: Promise.resolve(), result };
    },
    answeredWithin: (ms: number) => quietForMs < ms,
    close: async () => {},
  };
  return sender;
}

describe.each(backends().filter((b) => b.name === "postgres"))("held jobs and the start-write connection ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  async function heldJobs(n: number): Promise<ClaimedJob[]> {
    const queue = uniqueName("held");
    await enqueueMany(
      Array.from({ length: n }, (_, i) => ({ task: "t", payload: i })),
      { db: t.db, queue },
    );
    const { jobs } = await claimJobs(t.db, { queues: [queue], limit: n, start: 0, lease: 30, workerId: "w" });
    expect(jobs.every((j) => !j.started)).toBe(true);
    return jobs;
  }

  /**
   * Start writes over `sender` for buffered runs of `jobs`. `settled`: the first time the writes
   * say the claim loop may act, once the start write has run its course (ran, or failed and requeued).
   */
  function startsOver(sender: OrderedSender, jobs: ClaimedJob[]): { ran: ClaimedJob[]; requeued: Run[]; errors: unknown[]; settled: Promise<void> } {
    const executor = Object.create(t.db.executor) as typeof t.db.executor;
    executor.orderedSender = () => sender;
    const db = Object.create(t.db) as typeof t.db;
    Object.defineProperty(db, "executor", { value: executor });
    const ran: ClaimedJob[] = [];
    const requeued: Run[] = [];
    const errors: unknown[] = [];
    const woken = deferred();
    const runs = jobs.map((job) => ({ ...newRun(job, "buffered"), state: "starting" as const }));
    new StartWrites(db, 30).send(runs, {
      run: (run) => ran.push(run.job),
      fenced: () => undefined,
      lost: () => undefined,
      requeue: (back) => requeued.push(...back),
      stopping: () => false,
      settled: () => woken.resolve(),
      onError: (e) => errors.push(e),
    });
    return { ran, requeued, errors, settled: woken.promise };
  }

  it("on a connection silent for a while, waits for the start write's answer: a dead connection runs nothing and the jobs stay held", async () => {
    const jobs = await heldJobs(3);
    const sender = deadSender(60_000);
    const { ran, requeued, errors, settled } = startsOver(sender, jobs);
    await settled;
    expect(sender.sends).toBe(1);
    expect(ran).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(requeued.map((r) => r.job.id)).toEqual(jobs.map((j) => j.id)); // buffered again, unstarted, for the next write
  });

  it("on a connection that answered a moment ago, runs the handlers as soon as the write has left", async () => {
    const jobs = await heldJobs(2);
    const { ran, settled } = startsOver(deadSender(10), jobs);
    await settled;
    expect(ran.map((j) => j.id)).toEqual(jobs.map((j) => j.id));
  });

  it("a run that ends before its start write is executed waits for that write's answer: the completion never overtakes it, the attempt is counted", async () => {
    // The start write leaves on its own connection and the handler runs at once; the server may
    // execute that write late (a busy backend). Here it sleeps before touching any row, as a
    // descheduled backend would; the completion goes on another connection meanwhile. Written
    // first, it ended the job with the start write finding no row of its own: done, 0 attempts.
    const fn = `${t.db.table.replace(/"jobs"$/, '"slow_start"')}`;
    await t.sql(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_query() LIKE '%COALESCE(j.started_at, now())%' THEN PERFORM pg_sleep(0.3); END IF;
        RETURN NULL;
      END $$`);
    await t.sql(`CREATE TRIGGER slow_start BEFORE UPDATE ON {jobs} FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`);
    try {
      const queue = uniqueName("overtake");
      const ids = await enqueueMany(
        Array.from({ length: 6 }, (_, i) => ({ task: "t", payload: i })),
        { db: t.db, queue },
      );
      const stop = new AbortController();
      let done = 0;
      // Concurrency 1 with a buffer: every job after the first is held, then started by a start write.
      const worker = createWorker(
        {
          t: () => {
            if (++done === ids.length) stop.abort();
            return null;
          },
        },
        { db: t.db, queue, concurrency: 1, prefetch: 5, pollInterval: 0.05, signal: stop.signal },
      );
      await worker.run();
      const rows = await t.sql<{ id: number | string; status: string; attempts: number | string }>(
        `SELECT id, status, attempts FROM {all} WHERE queue = $1 ORDER BY id`,
        [queue],
      );
      expect(rows.map((r) => ({ id: Number(r.id), status: r.status, attempts: Number(r.attempts) }))).toEqual(
        ids.map((id) => ({ id, status: "done", attempts: 1 })),
      );
    } finally {
      await t.sql(`DROP TRIGGER slow_start ON {jobs}`);
    }
  }, 30_000);
});
