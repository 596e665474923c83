import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, createWorker, enqueue, getJob, JobError, processOne, prune, sendEvent, type JobContext } from "../src/index.js";
import { endTimedOutWaits } from "../src/events/wait-timeouts.js";
import { backends, deferred, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("events: sendEvent and ctx.waitForEvent ($name)", (backend) => {
  let t: TestDatabase;
  let events: string;
  let waits: string;
  beforeAll(async () => {
    t = await backend.create();
    events = t.tableName("jobs_events");
    waits = t.tableName("jobs_waits");
  });
  afterAll(() => t.close());

  /** A handler that waits for `event` of the payload's key and returns what it got. */
  function waiter(event: string, ran: string[] = [], timeout?: number) {
    return async (payload: { key: string }, ctx: JobContext) => {
      await ctx.step("before", () => (ran.push("before"), 1));
      const data = await ctx.waitForEvent("wait", { event, key: payload.key, ...(timeout === undefined ? {} : { timeout }) });
      ran.push("after");
      return { got: data };
    };
  }

  async function waitRows(id: number): Promise<number> {
    const [row] = await t.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${waits} WHERE job_id = $1`, [id]);
    return Number(row!.n);
  }

  it("waits without an attempt or a slot, is woken by sendEvent with its data, and resumes from the top with earlier steps from storage", async () => {
    const q = "wake";
    const ran: string[] = [];
    const id = await enqueue("w", { key: "order-1" }, { db: t.db, queue: q, maxAttempts: 1 });
    expect(await processOne({ w: waiter("paid", ran) }, { db: t.db, queue: q })).toBe(true);
    expect(ran).toEqual(["before"]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "waiting", attempts: 0 });
    expect(await waitRows(id)).toBe(1);
    // Not due: nothing to run.
    expect(await processOne({ w: waiter("paid", ran) }, { db: t.db, queue: q })).toBe(false);
    expect(await sendEvent("paid", { amount: 5 }, { key: "other-order", db: t.db })).toBe(0);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "waiting" });
    expect(await sendEvent("paid", { amount: 10 }, { key: "order-1", db: t.db })).toBe(1);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });
    expect(await waitRows(id)).toBe(0);
    expect(await processOne({ w: waiter("paid", ran) }, { db: t.db, queue: q })).toBe(true);
    expect(ran).toEqual(["before", "after"]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", attempts: 1, result: { got: { amount: 10 } } });
  });

  it("an event sent after the enqueue and before the wait is delivered at once; one sent before the enqueue is not", async () => {
    const q = "early";
    await sendEvent("shipped", "too old", { key: "k-early", db: t.db });
    // The clock's resolution (SQLite: milliseconds) must not decide: the old event is made older.
    await t.sql(`UPDATE ${events} SET created_at = ${t.db.sql.nowPlus("1", "-")} WHERE name = 'shipped'`);
    const id = await enqueue("w", { key: "k-early" }, { db: t.db, queue: q });
    await sendEvent("shipped", "fresh", { key: "k-early", db: t.db });
    await sendEvent("shipped", "later", { key: "k-early", db: t.db });
    const ran: string[] = [];
    expect(await processOne({ w: waiter("shipped", ran) }, { db: t.db, queue: q })).toBe(true);
    // The earliest event since the enqueue, in the same run: no wait at all.
    expect(ran).toEqual(["before", "after"]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: { got: "fresh" } });
    const late = await enqueue("w", { key: "k-early" }, { db: t.db, queue: q });
    await t.sql(`UPDATE {jobs} SET created_at = ${t.db.sql.nowPlus("60")} WHERE id = $1`, [late]);
    await processOne({ w: waiter("shipped") }, { db: t.db, queue: q });
    expect(await getJob(late, { db: t.db })).toMatchObject({ status: "waiting" });
    await cancelJob(late, { db: t.db });
  });

  it("is tenant-scoped: an event of tenant A never wakes tenant B's waiter, nor one without a tenant", async () => {
    const q = "tenants";
    const a = await enqueue("w", { key: "k" }, { db: t.db, queue: q, tenant: "A" });
    const b = await enqueue("w", { key: "k" }, { db: t.db, queue: q, tenant: "B" });
    const none = await enqueue("w", { key: "k" }, { db: t.db, queue: q });
    for (let i = 0; i < 3; i++) await processOne({ w: waiter("tenanted") }, { db: t.db, queue: q });
    for (const id of [a, b, none]) expect((await getJob(id, { db: t.db }))!.status).toBe("waiting");
    expect(await sendEvent("tenanted", "for A", { key: "k", tenant: "A", db: t.db })).toBe(1);
    expect((await getJob(a, { db: t.db }))!.status).toBe("pending");
    expect((await getJob(b, { db: t.db }))!.status).toBe("waiting");
    expect((await getJob(none, { db: t.db }))!.status).toBe("waiting");
    expect(await sendEvent("tenanted", "for none", { key: "k", db: t.db })).toBe(1);
    expect((await getJob(b, { db: t.db }))!.status).toBe("waiting");
    await processOne({ w: waiter("tenanted") }, { db: t.db, queue: q });
    await processOne({ w: waiter("tenanted") }, { db: t.db, queue: q });
    expect(await getJob(a, { db: t.db })).toMatchObject({ status: "done", result: { got: "for A" } });
    expect(await getJob(none, { db: t.db })).toMatchObject({ status: "done", result: { got: "for none" } });
    await cancelJob(b, { db: t.db });
  });

  it("one event wakes every waiter of its event, key and tenant", async () => {
    const q = "many";
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push(await enqueue("w", { key: "shared" }, { db: t.db, queue: q }));
    for (let i = 0; i < 5; i++) await processOne({ w: waiter("broadcast") }, { db: t.db, queue: q });
    expect(await sendEvent("broadcast", [1, 2], { key: "shared", db: t.db })).toBe(5);
    for (let i = 0; i < 5; i++) await processOne({ w: waiter("broadcast") }, { db: t.db, queue: q });
    for (const id of ids) expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: { got: [1, 2] } });
  });

  it("sendEvent is transactional: rolled back, it neither exists nor wakes; committed, it wakes", async () => {
    const q = "tx";
    const id = await enqueue("w", { key: "tx-key" }, { db: t.db, queue: q });
    await processOne({ w: waiter("txev") }, { db: t.db, queue: q });
    await t.withTransaction((bound) => sendEvent("txev", 1, { key: "tx-key", db: bound }), "rollback");
    expect((await getJob(id, { db: t.db }))!.status).toBe("waiting");
    const [row] = await t.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${events} WHERE name = 'txev'`);
    expect(Number(row!.n)).toBe(0);
    await t.withTransaction((bound) => sendEvent("txev", 2, { key: "tx-key", db: bound }), "commit");
    expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
  });

  it("a timeout passed: the sweep puts the job back to pending and the wait returns null", async () => {
    const q = "timeout";
    const id = await enqueue("w", { key: "never" }, { db: t.db, queue: q });
    await processOne({ w: waiter("nothing", [], 3600) }, { db: t.db, queue: q });
    expect((await getJob(id, { db: t.db }))!.status).toBe("waiting");
    expect(await endTimedOutWaits(t.db)).toBe(0);
    await t.sql(`UPDATE ${waits} SET timeout_at = ${t.db.sql.nowPlus("1", "-")} WHERE job_id = $1`, [id]);
    expect(await endTimedOutWaits(t.db)).toBe(1);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 0 });
    // A later event finds no waiter: the timeout answered it.
    expect(await sendEvent("nothing", "late", { key: "never", db: t.db })).toBe(0);
    await processOne({ w: waiter("nothing", [], 3600) }, { db: t.db, queue: q });
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: { got: null } });
  });

  it("sendEvent wakes an idle worker at once (NOTIFY at commit on PostgreSQL, in process elsewhere), not at its next poll", async () => {
    const q = "woken";
    const id = await enqueue("w", { key: "now" }, { db: t.db, queue: q });
    const stop = new AbortController();
    const waiting = deferred();
    const done = deferred<number>();
    // An hour between polls: only a wake-up can bring the job back before the test's timeout.
    const worker = createWorker({ w: waiter("ready") }, { db: t.db, queue: q, pollInterval: 3600, sweepInterval: 0, schedules: false, signal: stop.signal });
    worker.on("job:succeeded", (e) => done.resolve(e.job.id));
    worker.on("worker:idle", () => waiting.resolve());
    const running = worker.run();
    await waiting.promise;
    await waitFor("the job waiting", async () => (await getJob(id, { db: t.db }))?.status === "waiting");
    expect(await sendEvent("ready", "go", { key: "now", db: t.db })).toBe(1);
    expect(await done.promise).toBe(id);
    stop.abort();
    await running;
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: { got: "go" } });
  });

  it("a worker's sweep ends the timed-out waits by itself", async () => {
    const q = "sweep";
    const id = await enqueue("w", { key: "none" }, { db: t.db, queue: q });
    const done = deferred<number>();
    const stop = new AbortController();
    const worker = createWorker({ w: waiter("nothing-either", [], 0.3) }, { db: t.db, queue: q, sweepInterval: 0.1, pollInterval: 0.1, signal: stop.signal });
    worker.on("job:succeeded", (e) => done.resolve(e.job.id));
    const running = worker.run();
    expect(await done.promise).toBe(id);
    stop.abort();
    await running;
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", attempts: 1, result: { got: null } });
  });

  it("a waiting job can be cancelled; its wait goes, and a later event wakes nothing", async () => {
    const q = "cancel";
    const id = await enqueue("w", { key: "c" }, { db: t.db, queue: q });
    await processOne({ w: waiter("cancelled-ev") }, { db: t.db, queue: q });
    expect(await cancelJob(id, { db: t.db })).toBe(true);
    expect((await getJob(id, { db: t.db }))!.status).toBe("cancelled");
    expect(await sendEvent("cancelled-ev", 1, { key: "c", db: t.db })).toBe(0);
    expect(await waitRows(id)).toBe(0);
    expect((await getJob(id, { db: t.db }))!.status).toBe("cancelled");
  });

  it("50 waits and 50 sendEvents at once: every wait gets its event (no wake is lost between a wait and an event)", async () => {
    const q = "race";
    const n = 50;
    const ids: number[] = [];
    for (let i = 0; i < n; i++) ids.push(await enqueue("w", { key: `race-${i}` }, { db: t.db, queue: q }));
    const handler = async (payload: { key: string }, ctx: JobContext) => ({ got: await ctx.waitForEvent("wait", { event: "raced", key: payload.key }) });
    await Promise.all([
      ...ids.map(() => processOne({ w: handler }, { db: t.db, queue: q })),
      ...ids.map((_, i) => sendEvent("raced", i, { key: `race-${i}`, db: t.db })),
    ]);
    const [row] = await t.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM {jobs} WHERE queue = $1 AND status = 'waiting'`, [q]);
    expect(Number(row!.n)).toBe(0);
    while (await processOne({ w: handler }, { db: t.db, queue: q }));
    for (let i = 0; i < n; i++) expect(await getJob(ids[i]!, { db: t.db })).toMatchObject({ status: "done", result: { got: i } });
  });

  it.skipIf(backend.name === "sqlite")(
    "a wait that ends while an event's transaction is open waits for it, then finds the event (the per-event lock)",
    async () => {
      const q = "interleave";
      const id = await enqueue("w", { key: "open-tx" }, { db: t.db, queue: q });
      const sent = deferred();
      const release = deferred();
      // The event is written, and its waiters looked for (none yet), in a transaction held open.
      const sending = t.withTransaction(async (bound) => {
        await sendEvent("interleaved", "data", { key: "open-tx", db: bound });
        sent.resolve();
        await release.promise;
      }, "commit");
      await sent.promise;
      // The run misses the uncommitted event and ends to wait: it must not record its wait
      // before the event's transaction ends, or neither would see the other.
      const running = processOne({ w: waiter("interleaved") }, { db: t.db, queue: q });
      const blocked =
        backend.name === "postgres"
          ? `SELECT COUNT(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`
          : `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE info LIKE CONCAT('INSERT INTO ', $1, '%')`;
      const params = backend.name === "postgres" ? [] : [t.tableName("jobs_event_locks")];
      let finished = false;
      void running.finally(() => (finished = true));
      await waitFor(
        "the run to end or wait for the event's lock",
        async () => finished || Number((await t.sql<{ n: number | string }>(blocked, params))[0]!.n) > 0,
      );
      release.resolve();
      await sending;
      await running;
      expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
      await processOne({ w: waiter("interleaved") }, { db: t.db, queue: q });
      expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: { got: "data" } });
    },
  );

  it("events are kept for prune's olderThan: older ones go, with the waits of jobs no longer live", async () => {
    await sendEvent("kept", 1, { key: "old", db: t.db });
    await sendEvent("kept", 2, { key: "new", db: t.db });
    await t.sql(`UPDATE ${events} SET created_at = ${t.db.sql.nowPlus("7200", "-")} WHERE name = 'kept' AND event_key = 'old'`);
    await t.sql(
      `INSERT INTO ${waits} (job_id, step, event, event_key, tenant, child_id, timeout_at, created_at) VALUES (999999, 's', 'e', 'k', '', NULL, NULL, ${t.db.sql.now})`,
    );
    await prune({ db: t.db, olderThan: 3600 });
    expect((await t.sql<{ event_key: string }>(`SELECT event_key FROM ${events} WHERE name = 'kept'`)).map((r) => r.event_key)).toEqual(["new"]);
    expect(await waitRows(999999)).toBe(0);
  });

  it("bad input is a JobError and writes nothing", async () => {
    const count = async () => Number((await t.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${events} WHERE name = 'bad'`))[0]!.n);
    await expect(sendEvent("bad", 1, { db: t.db } as never)).rejects.toThrow(/options.key is required/);
    await expect(sendEvent("bad", 1, { key: "", db: t.db })).rejects.toThrow(JobError);
    await expect(sendEvent("bad", () => 1, { key: "k", db: t.db })).rejects.toThrow(/data/);
    await expect(sendEvent("bad", 1n, { key: "k", db: t.db })).rejects.toThrow(JobError);
    await expect(sendEvent("", 1, { key: "k", db: t.db })).rejects.toThrow(/event must be a non-empty string/);
    await expect(sendEvent("bad", 1, { key: "k", tenant: "", db: t.db })).rejects.toThrow(/tenant/);
    await expect(sendEvent("bad", 1, { key: "k", keys: 1, db: t.db } as never)).rejects.toThrow(/unknown option/);
    expect(await count()).toBe(0);
    const q = "bad-wait";
    const id = await enqueue("w", { key: "k" }, { db: t.db, queue: q, maxAttempts: 3 });
    await processOne({ w: waiter("bad", [], 0) }, { db: t.db, queue: q });
    const job = await getJob(id, { db: t.db });
    // A mistake in the handler's code: failed for good, not retried, no wait recorded.
    expect(job).toMatchObject({ status: "failed", attempts: 1 });
    expect(job!.lastError).toMatch(/timeout must be a number of seconds more than 0/);
    expect(await waitRows(id)).toBe(0);
  });
});
