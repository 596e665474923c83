import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, processOne, reclaim, type JobContext } from "../src/index.js";
import { backends, deferred, type TestDatabase } from "./helpers/backends.js";

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
    const run = processOne({ stale: async (_p, ctx: JobContext) => { started.resolve(ctx); await release.promise; } }, { db: t.db, queue: "cp3", lease: 60 });
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
