// Debounce (`{ debounce: { key, seconds, maxWait? } }`): while the key's job is pending and has
// not started, an enqueue replaces its payload and pushes its start to `seconds` from now, never
// past `maxWait` after the first enqueue, and returns its id; once it has started, a new job.
// Times are read from the database clock and compared with a tolerance for the test's own pace.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, enqueueMany, getJob, JobError, processOne, prune } from "../src/index.js";
import { enqueueBatch } from "../src/enqueue/batch-enqueue.js";
import { backends, uniqueName, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("debounce ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const count = async (queue: string) => Number((await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all} WHERE queue = $1", [queue]))[0]!.n);
  const job = async (id: number) => (await getJob(id, { db: t.db }))!;
  /** Seconds from the database's now to the job's start. */
  const startsIn = async (id: number) => ((await job(id)).runAt.getTime() - (await t.now()).getTime()) / 1000;

  it("a second enqueue of the key replaces the pending job's payload, pushes its start back and returns its id", async () => {
    const queue = uniqueName("dq");
    const first = await enqueue("save", { n: 1 }, { db: t.db, queue, debounce: { key: "doc:1", seconds: 100 } });
    expect(await startsIn(first)).toBeGreaterThan(95);
    expect(await startsIn(first)).toBeLessThanOrEqual(100);
    const again = await enqueue("save", { n: 2 }, { db: t.db, queue, debounce: { key: "doc:1", seconds: 300 } });
    const other = await enqueue("save", { n: 3 }, { db: t.db, queue, debounce: { key: "doc:2", seconds: 300 } });
    expect(again).toBe(first);
    expect(other).not.toBe(first);
    expect(await count(queue)).toBe(2);
    const row = await job(first);
    expect(row.payload).toEqual({ n: 2 });
    expect(row.status).toBe("pending");
    expect(await startsIn(first)).toBeGreaterThan(295);
  });

  it("maxWait caps the push: never later than maxWait after the first enqueue", async () => {
    const queue = uniqueName("dq-max");
    const first = await enqueue("save", { n: 1 }, { db: t.db, queue, debounce: { key: "k", seconds: 1000, maxWait: 60 } });
    const created = (await job(first)).createdAt.getTime();
    expect(((await job(first)).runAt.getTime() - created) / 1000).toBeCloseTo(60, 1);
    for (let n = 2; n <= 4; n++) expect(await enqueue("save", { n }, { db: t.db, queue, debounce: { key: "k", seconds: 1000, maxWait: 60 } })).toBe(first);
    const row = await job(first);
    expect(row.payload).toEqual({ n: 4 });
    expect((row.runAt.getTime() - created) / 1000).toBeCloseTo(60, 1);
    // Without maxWait the same key's job is pushed the whole `seconds`.
    expect(await enqueue("save", { n: 5 }, { db: t.db, queue, debounce: { key: "k", seconds: 1000 } })).toBe(first);
    expect(await startsIn(first)).toBeGreaterThan(990);
  });

  it("the push keeps the due flag (migration 19) with run_at: out of the claim index while it waits, in once maxWait has passed", async () => {
    const queue = uniqueName("dq-due");
    const due = async (id: number) => {
      const value = (await t.sql<{ due: unknown }>("SELECT due FROM {jobs} WHERE id = $1", [id]))[0]!.due;
      return value === true || Number(value) === 1;
    };
    const id = await enqueue("save", null, { db: t.db, queue, debounce: { key: "due", seconds: 1000, maxWait: 60 } });
    expect(await due(id)).toBe(false);
    // First enqueued two minutes ago: the next push is capped at a minute ago, so due now.
    const back = { postgres: "created_at - interval '2 minutes'", sqlite: "created_at - 120000", mysql: "created_at - INTERVAL 2 MINUTE" }[backend.name];
    await t.sql(`UPDATE {jobs} SET created_at = ${back} WHERE id = $1`, [id]);
    expect(await enqueue("save", null, { db: t.db, queue, debounce: { key: "due", seconds: 1000, maxWait: 60 } })).toBe(id);
    expect(await due(id)).toBe(true);
    expect(await startsIn(id)).toBeLessThan(-55);
  });

  it("once the job has started, the key makes a new job; a retried (started) pending job is not reused either", async () => {
    const queue = uniqueName("dq-start");
    const first = await enqueue("save", { n: 1 }, { db: t.db, queue, debounce: { key: "s", seconds: 0.05 } });
    let during: number | undefined;
    await waitFor("the debounced job to run", () =>
      processOne(
        { save: async () => void (during ??= await enqueue("save", { n: 2 }, { db: t.db, queue, debounce: { key: "s", seconds: 0.05 } })) },
        { db: t.db, queue },
      ),
    );
    expect(during).toBeDefined();
    expect(during).not.toBe(first);
    expect((await job(first)).status).toBe("done");
    expect((await job(during!)).payload).toEqual({ n: 2 });
    // A job that failed once and waits for its retry has started: not reused.
    const retried = await enqueue("boom", null, { db: t.db, queue: `${queue}-r`, maxAttempts: 3, debounce: { key: "r", seconds: 0.05 } });
    await waitFor("the job's first attempt", () => processOne({ boom: () => Promise.reject(new Error("no")) }, { db: t.db, queue: `${queue}-r` }));
    expect((await job(retried)).status).toBe("pending");
    const next = await enqueue("boom", null, { db: t.db, queue: `${queue}-r`, maxAttempts: 3, debounce: { key: "r", seconds: 0.05 } });
    expect(next).not.toBe(retried);
  });

  it("prune() deletes the keys whose job has ended, and keeps those of pending jobs", async () => {
    const queue = uniqueName("dq-prune");
    const keys = async (key: string) =>
      Number((await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM ${t.tableName("jobs_debounce")} WHERE debounce_key = $1`, [key]))[0]!.n);
    const ended = await enqueue("p", null, { db: t.db, queue, debounce: { key: "prune:ended", seconds: 100 } });
    await enqueue("p", null, { db: t.db, queue, debounce: { key: "prune:pending", seconds: 100 } });
    expect(await cancelJob(ended, { db: t.db })).toBe(true);
    expect([await keys("prune:ended"), await keys("prune:pending")]).toEqual([1, 1]);
    await prune({ olderThan: 86_400, db: t.db });
    expect([await keys("prune:ended"), await keys("prune:pending")]).toEqual([0, 1]);
    // The key works as before: a new job, since its job had ended.
    expect(await enqueue("p", null, { db: t.db, queue, debounce: { key: "prune:ended", seconds: 100 } })).not.toBe(ended);
  });

  it("50 concurrent enqueues of one key make one job, holding a payload of theirs", async () => {
    const queue = uniqueName("dq-race");
    const resolved: number[] = [];
    const ids = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        enqueue("race", { i }, { db: t.db, queue, debounce: { key: "race", seconds: 100 } }).then((id) => (resolved.push(i), id)),
      ),
    );
    expect(new Set(ids).size).toBe(1);
    expect(await count(queue)).toBe(1);
    const payload = (await job(ids[0]!)).payload as { i: number };
    // SQLite's transactions run one after the other on the one connection: the last to resolve committed last.
    if (backend.name === "sqlite") expect(payload.i).toBe(resolved.at(-1));
    else expect(resolved).toContain(payload.i);
  });

  it.skipIf(backend.name === "sqlite")("50 concurrent callers' transactions: one job, with the payload of the last to commit", async () => {
    const queue = uniqueName("dq-tx");
    const log = t.tableName(uniqueName("debounce_log"));
    const serial = backend.name === "postgres" ? "seq bigserial PRIMARY KEY" : "seq BIGINT AUTO_INCREMENT PRIMARY KEY";
    await t.db.executor.query(`CREATE TABLE ${log} (${serial}, i INT NOT NULL)`);
    // Each transaction holds the key's lock from its enqueue to its commit, so the order of its
    // log rows (written after the enqueue) is the commit order.
    const ids = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        t.withTransaction(async (bound) => {
          const id = await enqueue("race", { i }, { db: bound, queue, debounce: { key: "tx-race", seconds: 100 } });
          await bound.executor.query(`INSERT INTO ${log} (i) VALUES ($1)`, [i]);
          return id;
        }, "commit"),
      ),
    );
    expect(new Set(ids).size).toBe(1);
    expect(await count(queue)).toBe(1);
    const [last] = await t.sql<{ i: number }>(`SELECT i FROM ${log} ORDER BY seq DESC LIMIT 1`);
    expect((await job(ids[0]!)).payload).toEqual({ i: Number(last!.i) });
  });

  it.skipIf(backend.name === "sqlite")("inside a caller's transaction: rolled back with it, visible when it commits", async () => {
    const queue = uniqueName("dq-rb");
    await t.withTransaction((bound) => enqueue("x", { n: 1 }, { db: bound, queue, debounce: { key: "rb", seconds: 100 } }), "rollback");
    expect(await count(queue)).toBe(0);
    const id = await t.withTransaction((bound) => enqueue("x", { n: 2 }, { db: bound, queue, debounce: { key: "rb", seconds: 100 } }), "commit");
    expect(await enqueue("x", { n: 3 }, { db: t.db, queue, debounce: { key: "rb", seconds: 100 } })).toBe(id);
    expect((await job(id)).payload).toEqual({ n: 3 });
  });

  it.runIf(backend.name === "sqlite")("inside the application's own SQLite transaction: refused, nothing written", async () => {
    const queue = uniqueName("dq-sync");
    await expect(t.withTransaction((bound) => enqueue("x", null, { db: bound, queue, debounce: { key: "sync", seconds: 100 } }), "commit")).rejects.toThrow(
      /debounce: enqueue cannot join the transaction open on this SQLite handle/,
    );
    expect(await count(queue)).toBe(0);
  });

  it("a key held by another tenant's or another task's pending job is a JobError, nothing changed", async () => {
    const queue = uniqueName("dq-owner");
    const id = await enqueue("a", { n: 1 }, { db: t.db, queue, tenant: "org1", debounce: { key: "owned", seconds: 100 } });
    await expect(enqueue("a", { n: 2 }, { db: t.db, queue, tenant: "org2", debounce: { key: "owned", seconds: 100 } })).rejects.toThrow(/another tenant/);
    await expect(enqueue("b", { n: 3 }, { db: t.db, queue, tenant: "org1", debounce: { key: "owned", seconds: 100 } })).rejects.toThrow(/task "a"/);
    expect((await job(id)).payload).toEqual({ n: 1 });
    expect(await count(queue)).toBe(1);
  });

  it("refused with keys, a delay, dependencies, in enqueueMany and batches, and bad shapes: a JobError, nothing written", async () => {
    const queue = uniqueName("dq-bad");
    const debounce = { key: "bad", seconds: 10 };
    const cases: [() => Promise<unknown>, RegExp][] = [
      [() => enqueue("x", null, { db: t.db, queue, debounce, idempotencyKey: "i" }), /debounce cannot be combined with idempotencyKey/],
      [() => enqueue("x", null, { db: t.db, queue, debounce, dedupKey: "d" }), /debounce cannot be combined with dedupKey/],
      [() => enqueue("x", null, { db: t.db, queue, debounce, throttle: { key: "t", seconds: 5 } }), /debounce cannot be combined with throttle/],
      [() => enqueue("x", null, { db: t.db, queue, debounce, availableIn: 5 }), /debounce cannot be combined with availableIn/],
      [() => enqueue("x", null, { db: t.db, queue, debounce, dependsOn: [1] }), /debounce cannot be combined with dependsOn/],
      [() => enqueueMany([{ task: "x", debounce }], { db: t.db, queue }), /items\[0\]\.debounce: debounce works with enqueue only/],
      [() => enqueueBatch([{ task: "x" }, { task: "x", debounce }], { db: t.db, queue }), /items\[1\]\.debounce: debounce works with enqueue only/],
      [() => enqueue("x", null, { db: t.db, queue, debounce: { key: "", seconds: 1 } }), /debounce\.key must be a non-empty string/],
      [() => enqueue("x", null, { db: t.db, queue, debounce: { key: "k", seconds: 0 } }), /debounce\.seconds must be a number of seconds > 0/],
      [() => enqueue("x", null, { db: t.db, queue, debounce: { key: "k", seconds: 1, maxWait: -1 } }), /debounce\.maxWait must be/],
      [() => enqueue("x", null, { db: t.db, queue, debounce: { key: "k", seconds: 1, wait: 3 } as never }), /wait/],
      [() => enqueue("x", null, { db: t.db, queue, debounce: "k" as never }), /debounce must be an object/],
      [() => enqueue("x", null, { db: t.db, queue, debounce: { key: "k".repeat(256), seconds: 1 } }), /debounce\.key/],
    ];
    for (const [call, message] of cases) {
      const error: unknown = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error, String(message)).toBeInstanceOf(JobError);
      expect((error as Error).message).toMatch(message);
    }
    expect(await count(queue)).toBe(0);
    const [keys] = await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM ${t.tableName("jobs_debounce")} WHERE debounce_key = 'bad'`);
    expect(Number(keys!.n)).toBe(0);
  });
});
