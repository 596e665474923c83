// Pruning and batches (issue 19, DESIGN.md: "Pruning never deletes a finished job that … an
// unfinished batch still needs"): a batch's finished items stay while its callback has not
// ended — pending, then running and reading ctx.batch() — and go with the first prune after it
// ended. A plain job finished beside them shows each prune did delete what it may. All
// backends: ended jobs in the history table, legacy ended rows of the live table (issue 33,
// written by SQL: helpers/legacy-rows.ts), and prune({ into: "history" }) of those legacy rows,
// which applies the same rule.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, enqueueBatch, getJob, processOne, prune, type BatchSummary, type JobContext } from "../src/index.js";
import { backends, deferred, waitFor, type TestDatabase } from "./helpers/backends.js";
import { makeLegacy } from "./helpers/legacy-rows.js";

describe.each(backends())("prune and batches ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const status = async (id: number) => (await getJob(id, { db: t.db }))?.status;
  /** Which of `ids` are still rows of `table`: the jobs table (`{jobs}`: the legacy rows a move takes) or either (`{all}`). */
  const rowsIn = async (table: "{jobs}" | "{all}", ids: number[]) =>
    (await t.sql<{ id: number | string }>(`SELECT id FROM ${table} WHERE id IN (${ids.map((_, i) => `$${i + 1}`).join(", ")}) ORDER BY id`, ids)).map((r) =>
      Number(r.id),
    );
  /** Until the database clock is past when these jobs finished: then a prune with an age of 0 may take them. */
  const finishedBeforeNow = (ids: number[]) =>
    waitFor(`jobs ${ids.join(", ")} finished before the database's now`, async () => {
      const now = await t.now();
      for (const id of ids) {
        const job = await getJob(id, { db: t.db });
        if (!job || !("finishedAt" in job) || !(job.finishedAt < now)) return false;
      }
      return true;
    });

  /** `legacy`: the ended items, plain job and callback are made legacy rows as they end (always so for a move). */
  async function keptUntilTheCallbackEnded(queue: string, into?: "history", legacy = into === "history"): Promise<void> {
    const inJobsTable = (ids: number[]) => rowsIn(into ? "{jobs}" : "{all}", ids);
    const { batchId, ids, callbackId } = await enqueueBatch([{ task: "item" }, { task: "item" }, { task: "item" }], {
      db: t.db,
      queue,
      onComplete: { task: "report" },
    });
    const callback = callbackId as number;
    const [doneItem, failedItem, cancelledItem] = ids as [number, number, number];
    // The items end done, failed and cancelled; a plain job of another queue ends beside them.
    const items = {
      item: (_p: unknown, ctx: JobContext) => {
        if (ctx.job.id === failedItem) throw Object.assign(new Error("failed on purpose"), { retryable: false });
        return "ok";
      },
    };
    expect(await processOne(items, { db: t.db, queue })).toBe(true);
    expect(await processOne(items, { db: t.db, queue })).toBe(true);
    expect(await cancelJob(cancelledItem, { db: t.db })).toBe(true);
    const plain = await enqueue("plain", null, { db: t.db, queue: `${queue}-plain` });
    expect(await processOne({ plain: () => "ok" }, { db: t.db, queue: `${queue}-plain` })).toBe(true);
    const itemStatuses = () => Promise.all(ids.map(status));
    expect(await itemStatuses()).toEqual(["done", "failed", "cancelled"]);
    await finishedBeforeNow([...ids, plain]);
    if (legacy) await makeLegacy(t, [...ids, plain]);

    // Every item ended, the callback has not run.
    expect(await status(callback)).toBe("pending");
    expect(await prune({ db: t.db, olderThan: 0, ...(into ? { into } : {}) })).toBe(1);
    expect(await inJobsTable([plain, ...ids])).toEqual(ids);
    expect(await itemStatuses()).toEqual(["done", "failed", "cancelled"]);

    // The callback runs; a prune while it runs keeps the items it is about to count.
    const running = deferred();
    const counted = deferred();
    let seen: BatchSummary | null = null;
    const reporting = processOne(
      {
        report: async (_p: unknown, ctx: JobContext) => {
          running.resolve();
          await counted.promise;
          seen = await ctx.batch();
        },
      },
      { db: t.db, queue },
    );
    await running.promise;
    expect(await status(callback)).toBe("running");
    expect(await prune({ db: t.db, olderThan: 0, ...(into ? { into } : {}) })).toBe(0);
    expect(await inJobsTable(ids)).toEqual(ids);
    counted.resolve();
    expect(await reporting).toBe(true);
    expect(seen).toEqual({ batchId, done: 1, failed: 1, cancelled: 1, failedIds: [failedItem] });
    expect(await status(callback)).toBe("done");

    // The callback ended: the next prune takes the items (and the callback).
    await finishedBeforeNow([callback]);
    if (legacy) await makeLegacy(t, [callback]);
    expect(await prune({ db: t.db, olderThan: 0, ...(into ? { into } : {}) })).toBe(4);
    expect(await inJobsTable([...ids, callback])).toEqual([]);
    // Deleted, or (into the history table) still found by getJob, as they ended.
    const after = await Promise.all([doneItem, failedItem, cancelledItem, callback].map(status));
    expect(after).toEqual(into ? ["done", "failed", "cancelled", "done"] : [undefined, undefined, undefined, undefined]);
  }

  it("prune keeps a batch's finished items while its callback is pending or running, and removes them once it ended", async () => {
    await keptUntilTheCallbackEnded("prune-batch");
  });

  it("prune keeps them the same way as legacy ended rows of the live table", async () => {
    await keptUntilTheCallbackEnded("legacy-batch", undefined, true);
  });

  it("prune into the history table keeps them the same way", async () => {
    await keptUntilTheCallbackEnded("history-batch", "history");
  });
});
