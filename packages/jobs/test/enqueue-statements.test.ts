// Issue 21.3: one enqueue is one statement on every backend — on MariaDB it once took four round
// trips (START TRANSACTION, INSERT IGNORE, SELECT @@warning_count, COMMIT), three times a plain
// INSERT's time with a synced commit. Counted through a wrapper of the executor: no timing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, getJob, JobsDatabase } from "../src/index.js";
import type { Executor } from "../src/db/executor.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("statements per enqueue ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** A database whose executor records every statement and transaction sent through it. */
  function counting(): { db: JobsDatabase; sent: string[] } {
    const sent: string[] = [];
    const inner = t.db.executor;
    const spy: Executor = Object.create(inner, {
      query: { value: (sql: string, params?: unknown[], name?: string) => (sent.push(sql), inner.query(sql, params, name)) },
      transaction: { value: (fn: (tx: Executor) => Promise<unknown>, options?: object) => (sent.push("transaction"), inner.transaction(fn, options)) },
    }) as Executor;
    return { db: new JobsDatabase(spy, t.db.settings), sent };
  }

  it("a job without keys, and a job with a free key, each take one statement and no transaction", async () => {
    const { db, sent } = counting();
    const plain = await enqueue("statements.plain", { n: 1 }, { db, queue: "statements" });
    expect(sent).toHaveLength(1);
    const keyed = await enqueue("statements.keyed", { n: 2 }, { db, queue: "statements", dedupKey: `free-${Date.now()}` });
    expect(sent).toHaveLength(2);
    expect(sent).not.toContain("transaction");
    expect((await getJob(plain, { db: t.db }))?.payload).toEqual({ n: 1 });
    expect((await getJob(keyed, { db: t.db }))?.payload).toEqual({ n: 2 });
  });

  it("a job whose idempotency key is taken gets the holder's id, in one transaction (the insert, then the reads)", async () => {
    // An idempotency key stays taken by an ended job in history, which the live table's unique
    // index does not see: the keyed insert and its look-up there share a transaction.
    const key = `taken-${Date.now()}`;
    const first = await enqueue("statements.keyed", null, { db: t.db, queue: "statements", idempotencyKey: key });
    const { db, sent } = counting();
    expect(await enqueue("statements.keyed", null, { db, queue: "statements", idempotencyKey: key })).toBe(first);
    expect(sent).toEqual(["transaction"]);
  });

  it("enqueueMany without keys, in one chunk, is one statement", async () => {
    const { db, sent } = counting();
    const ids = await enqueueMany(
      [1, 2, 3].map((n) => ({ task: "statements.many", payload: { n } })),
      { db, queue: "statements" },
    );
    expect(ids).toHaveLength(3);
    expect(sent).toHaveLength(1);
    expect(sent).not.toContain("transaction");
  });
});
