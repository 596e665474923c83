import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, processOne, statusCounts, JobsDatabase } from "../src/index.js";
import type { Executor, TransactionOptions } from "../src/db/executor.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("statusCounts ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("counts per queue: PENDING, RUNNING, FAILED, DONE, and READY = pending and runnable now", async () => {
    await enqueue("ok", null, { db: t.db, queue: "s1" });
    await enqueue("bad", null, { db: t.db, queue: "s1" });
    await enqueue("later", null, { db: t.db, queue: "s1", availableIn: 600 });
    await enqueue("ready", null, { db: t.db, queue: "s1" });
    await enqueue("other", null, { db: t.db, queue: "s2" });
    await processOne({ ok: () => 1 }, { db: t.db, queue: "s1" });
    await processOne(
      {
        bad: () => {
          throw new Error("x");
        },
      },
      { db: t.db, queue: "s1" },
    );
    const all = await statusCounts({ db: t.db });
    expect(all.map((s) => s.queue)).toEqual(["s1", "s2"]);
    expect(all[0]).toMatchObject({ queue: "s1", counts: { pending: 2, running: 0, failed: 1, done: 1 }, ready: 1, total: 4 });
    expect(all[0]!.oldestReadyAge).toBeGreaterThanOrEqual(0);
    expect(await statusCounts({ db: t.db, queue: "s2" })).toEqual([expect.objectContaining({ queue: "s2", ready: 1, total: 1 })]);
    expect(await statusCounts({ db: t.db, queue: "nothing-here" })).toEqual([
      expect.objectContaining({ queue: "nothing-here", total: 0, ready: 0, oldestReadyAge: null }),
    ]);
  });

  it("reads in a read-only transaction, where a write fails", async () => {
    // Spy on the seam: which transaction options does statusCounts ask for?
    const asked: (TransactionOptions | undefined)[] = [];
    const inner = t.db.executor;
    const spy: Executor = Object.create(inner, {
      transaction: { value: (fn: (tx: Executor) => Promise<unknown>, options?: TransactionOptions) => (asked.push(options), inner.transaction(fn, options)) },
    }) as Executor;
    await statusCounts({ db: new JobsDatabase(spy, t.db.settings) });
    expect(asked).toEqual([{ readOnly: true }]);
    // And such a transaction refuses writes on this backend.
    await expect(inner.transaction((tx) => tx.query(`UPDATE ${t.db.table} SET priority = priority WHERE id = 1`), { readOnly: true })).rejects.toThrow();
  });
});
