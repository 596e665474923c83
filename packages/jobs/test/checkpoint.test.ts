import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { drain, enqueue, getJob, processOne, reclaim, type JobContext } from "../src/index.js";
import { backends, deferred, type Backend, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("checkpoint: the handler's writes and its progress in one transaction ($name)", (backend) => {
  let t: TestDatabase;
  let items: string;
  beforeAll(async () => {
    t = await backend.create();
    items = t.tableName("items");
    await t.sql(`CREATE TABLE ${items} (n INTEGER PRIMARY KEY)`);
  });
  afterAll(() => t.close());

  async function itemNumbers(from: number, to: number): Promise<number[]> {
    const rows = await t.sql<{ n: number | string }>(`SELECT n FROM ${items} WHERE n >= $1 AND n <= $2 ORDER BY n`, [from, to]);
    return rows.map((r) => Number(r.n));
  }

  it("commits each batch with its cursor; a retried job resumes from ctx.progress", async () => {
    const id = await enqueue("import", { from: 1, to: 10 }, { db: t.db, queue: "cp", maxAttempts: 2 });
    const seenProgress: unknown[] = [];
    let crashAfter: number | null = 6;
    const handler = async (p: { from: number; to: number }, ctx: JobContext) => {
      seenProgress.push(ctx.progress);
      const start = ((ctx.progress as { cursor: number } | null)?.cursor ?? p.from - 1) + 1;
      for (let n = start; n <= p.to; n += 2) {
        const saved = await ctx.checkpoint({ cursor: n + 1 }, (tx) => t.execOn(tx, `INSERT INTO ${items} (n) VALUES ($1), ($2)`, [n, n + 1]));
        expect(saved).toBe(true);
        if (crashAfter !== null && n + 1 >= crashAfter) {
          crashAfter = null;
          throw new Error("crash in the middle");
        }
      }
      return { imported: p.to - p.from + 1 };
    };
    await processOne({ import: handler }, { db: t.db, queue: "cp" });
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", progress: { cursor: 6 } });
    expect(await itemNumbers(1, 10)).toEqual([1, 2, 3, 4, 5, 6]);
    await t.sql("UPDATE {jobs} SET run_at = updated_at WHERE id = $1", [id]);
    await processOne({ import: handler }, { db: t.db, queue: "cp" });
    expect(seenProgress).toEqual([null, { cursor: 6 }]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", progress: { cursor: 10 } });
    expect(await itemNumbers(1, 10)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("progress given as a function is computed from what the work returned, and saved in its transaction", async () => {
    const id = await enqueue("counted", null, { db: t.db, queue: "cp-fn" });
    const seen: unknown[] = [];
    await processOne(
      {
        counted: async (_p, ctx: JobContext) => {
          await ctx.checkpoint({ created: 0 }, undefined);
          const saved = await ctx.checkpoint(
            (result: unknown) => ({ created: (result as { created: number }).created }),
            async (tx) => {
              await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (300), (301)`);
              return { created: 2 };
            },
          );
          seen.push(saved, ctx.progress);
          // A fenced or failing work never calls the function: the saved progress stays.
          await ctx
            .checkpoint(
              () => {
                throw new Error("must not be called");
              },
              async (tx) => {
                await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (300)`); // duplicate key
              },
            )
            .catch(() => undefined);
        },
      },
      { db: t.db, queue: "cp-fn" },
    );
    expect(seen).toEqual([true, { created: 2 }]);
    expect((await getJob(id, { db: t.db }))!.progress).toEqual({ created: 2 });
    expect(await itemNumbers(300, 301)).toEqual([300, 301]);
  });

  it("a work function that throws rolls back its writes and the progress", async () => {
    const id = await enqueue("partial", null, { db: t.db, queue: "cp2" });
    let rejected: unknown;
    await processOne(
      {
        partial: async (_p, ctx: JobContext) => {
          await ctx.checkpoint({ step: 1 }, (tx) => t.execOn(tx, `INSERT INTO ${items} (n) VALUES (100)`));
          rejected = await ctx
            .checkpoint({ step: 2 }, async (tx) => {
              await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (101)`);
              await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (100)`); // duplicate key
            })
            .catch((e: unknown) => e);
        },
      },
      { db: t.db, queue: "cp2" },
    );
    expect(rejected).toBeInstanceOf(Error);
    expect(await itemNumbers(100, 101)).toEqual([100]);
    expect((await getJob(id, { db: t.db }))!.progress).toEqual({ step: 1 });
  });

  it("resolves false when fenced, and then neither the writes nor the progress land", async () => {
    const id = await enqueue("stale", null, { db: t.db, queue: "cp3", maxAttempts: 2 });
    const started = deferred<JobContext>();
    const release = deferred();
    const run = processOne(
      {
        stale: async (_p, ctx: JobContext) => {
          started.resolve(ctx);
          await release.promise;
        },
      },
      { db: t.db, queue: "cp3", lease: 60 },
    );
    const ctx = await started.promise;
    expect(await ctx.checkpoint({ cursor: 1 }, (tx) => t.execOn(tx, `INSERT INTO ${items} (n) VALUES (200)`))).toBe(true);
    await reclaim({ db: t.db, lease: 0, queue: "cp3" });
    expect(await ctx.checkpoint({ cursor: 2 }, (tx) => t.execOn(tx, `INSERT INTO ${items} (n) VALUES (201)`))).toBe(false);
    expect(ctx.signal.aborted).toBe(true);
    release.resolve();
    await run;
    expect(await itemNumbers(200, 201)).toEqual([200]);
    expect((await getJob(id, { db: t.db }))!.progress).toEqual({ cursor: 1 });
  });
});

/** One connection of the queue's own pool, lent to processOne as a single client (pg) or connection (mysql2). */
async function lendConnection(t: TestDatabase, backend: Backend): Promise<{ connection: unknown; run(sql: string): Promise<void>; release(): void }> {
  if (backend.name === "postgres") {
    const client = await (t.db.executor.raw as import("pg").Pool).connect();
    return { connection: client, run: async (sql) => void (await client.query(sql)), release: () => client.release() };
  }
  const connection = await (t.db.executor.raw as import("mysql2/promise").Pool).getConnection();
  return { connection, run: async (sql) => void (await connection.query(sql)), release: () => connection.release() };
}

// (audit 12.7) processOne/drain given one connection still make a checkpoint one transaction:
// BEGIN … COMMIT on it, or a savepoint when the caller has its own transaction open there.
describe.each(backends().filter((b) => b.name !== "sqlite"))("checkpoint on a single connection lent to processOne ($name)", (backend) => {
  let t: TestDatabase;
  let items: string;
  beforeAll(async () => {
    t = await backend.create();
    items = t.tableName("lent_items");
    await t.sql(`CREATE TABLE ${items} (n INTEGER PRIMARY KEY)`);
  });
  afterAll(() => t.close());

  async function itemNumbers(from: number, to: number): Promise<number[]> {
    const rows = await t.sql<{ n: number | string }>(`SELECT n FROM ${items} WHERE n >= $1 AND n <= $2 ORDER BY n`, [from, to]);
    return rows.map((r) => Number(r.n));
  }

  /** Saves step 1 with item `base`, then fails half-way through step 2 (item base+1 written, then a duplicate). */
  const halfDone = (base: number, seen: { rejected?: unknown }) => ({
    partial: async (_p: unknown, ctx: JobContext) => {
      expect(await ctx.checkpoint({ step: 1 }, (tx) => t.execOn(tx, `INSERT INTO ${items} (n) VALUES (${base})`))).toBe(true);
      seen.rejected = await ctx
        .checkpoint({ step: 2 }, async (tx) => {
          await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (${base + 1})`);
          await t.execOn(tx, `INSERT INTO ${items} (n) VALUES (${base})`); // duplicate key
        })
        .catch((e: unknown) => e);
      return "finished";
    },
  });

  it("(audit 12.7) outside any transaction: a work function that throws rolls back its writes and the progress", async () => {
    const id = await enqueue("partial", null, { db: t.db, queue: "lent1" });
    const lent = await lendConnection(t, backend);
    const seen: { rejected?: unknown } = {};
    try {
      expect(await processOne(halfDone(300, seen), { db: t.db.bind(lent.connection), queue: "lent1" })).toBe(true);
    } finally {
      lent.release();
    }
    expect(seen.rejected).toBeInstanceOf(Error);
    expect(await itemNumbers(300, 301)).toEqual([300]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", progress: { step: 1 }, result: "finished" });
  });

  it("(audit 12.7) inside the caller's transaction: a failed checkpoint rolls back to its savepoint, the caller's writes stay", async () => {
    const id = await enqueue("partial", null, { db: t.db, queue: "lent2" });
    const lent = await lendConnection(t, backend);
    const seen: { rejected?: unknown } = {};
    try {
      await lent.run("BEGIN");
      await lent.run(`INSERT INTO ${items} (n) VALUES (399)`);
      expect(await processOne(halfDone(400, seen), { db: t.db.bind(lent.connection), queue: "lent2" })).toBe(true);
      await lent.run("COMMIT");
    } catch (error) {
      await lent.run("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      lent.release();
    }
    expect(seen.rejected).toBeInstanceOf(Error);
    expect(await itemNumbers(399, 401)).toEqual([399, 400]);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", progress: { step: 1 }, result: "finished" });
  });

  it("(audit 12.7) drain on a single connection: each job's checkpoint commits on its own", async () => {
    const ids = await Promise.all([1, 2].map(() => enqueue("one", null, { db: t.db, queue: "lent3" })));
    const lent = await lendConnection(t, backend);
    let next = 500;
    try {
      const handlers = {
        one: async (_p: unknown, ctx: JobContext) => ctx.checkpoint({ at: next }, (tx) => t.execOn(tx, `INSERT INTO ${items} (n) VALUES (${next++})`)),
      };
      expect(await drain(handlers, { db: t.db.bind(lent.connection), queue: "lent3" })).toBe(2);
    } finally {
      lent.release();
    }
    expect(await itemNumbers(500, 501)).toEqual([500, 501]);
    for (const id of ids) expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: true });
  });

  it.runIf(backend.name === "postgres")(
    "(audit 12.7) a pg client that cannot report its transaction status (pg < 8.21): idle and inside a transaction both work",
    async () => {
      const lent = await lendConnection(t, backend);
      // pg before 8.21 (and pg-native) has no getTransactionStatus; an own property shadows it.
      Object.assign(lent.connection as object, { getTransactionStatus: undefined });
      try {
        const idle = await enqueue("partial", null, { db: t.db, queue: "lent4" });
        const seen: { rejected?: unknown } = {};
        expect(await processOne(halfDone(600, seen), { db: t.db.bind(lent.connection), queue: "lent4" })).toBe(true);
        expect(seen.rejected).toBeInstanceOf(Error);
        const inside = await enqueue("partial", null, { db: t.db, queue: "lent4" });
        await lent.run("BEGIN");
        expect(await processOne(halfDone(700, seen), { db: t.db.bind(lent.connection), queue: "lent4" })).toBe(true);
        await lent.run("COMMIT");
        expect(await itemNumbers(600, 701)).toEqual([600, 700]);
        for (const id of [idle, inside]) expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", progress: { step: 1 } });
      } finally {
        delete (lent.connection as { getTransactionStatus?: unknown }).getTransactionStatus;
        await lent.run("ROLLBACK").catch(() => undefined);
        lent.release();
      }
    },
  );
});
