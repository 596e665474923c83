// Issue 21.3: one enqueue is one statement on every backend — on MariaDB it once took four round
// trips (START TRANSACTION, INSERT IGNORE, SELECT @@warning_count, COMMIT), three times a plain
// INSERT's time with a synced commit. Counted through a wrapper of the executor: no timing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, getJob, JobsDatabase } from "../src/index.js";
import type { Executor } from "../src/db/executor.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

/** `t`'s database with an executor that records every statement and transaction sent through it. */
function counting(t: TestDatabase): { db: JobsDatabase; sent: string[] } {
  const sent: string[] = [];
  const inner = t.db.executor;
  const spy: Executor = Object.create(inner, {
    query: { value: (sql: string, params?: unknown[], name?: string) => (sent.push(sql), inner.query(sql, params, name)) },
    transaction: { value: (fn: (tx: Executor) => Promise<unknown>, options?: object) => (sent.push("transaction"), inner.transaction(fn, options)) },
  }) as Executor;
  return { db: new JobsDatabase(spy, t.db.settings), sent };
}

describe.each(backends())("statements per enqueue ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("a job without keys, and a job with a free key, each take one statement and no transaction", async () => {
    const { db, sent } = counting(t);
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
    const { db, sent } = counting(t);
    expect(await enqueue("statements.keyed", null, { db, queue: "statements", idempotencyKey: key })).toBe(first);
    expect(sent).toEqual(["transaction"]);
  });

  it("enqueueMany without keys, in one chunk, is one statement", async () => {
    const { db, sent } = counting(t);
    const ids = await enqueueMany(
      [1, 2, 3].map((n) => ({ task: "statements.many", payload: { n } })),
      { db, queue: "statements" },
    );
    expect(ids).toHaveLength(3);
    expect(sent).toHaveLength(1);
    expect(sent).not.toContain("transaction");
  });
});

// Issue 36's options (a delay that keeps a job out of the claim index, dead letters, priority
// aging) each added columns to the insert; a chunk that uses none of them names none of them,
// so the plain path binds what it bound before. A chunk that mixes plain jobs with one that
// needs a column writes the plain jobs' defaults into it.
describe.each(backends())("the columns an insert names ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const inserts = (sent: string[]) => sent.filter((sql) => /INSERT INTO/i.test(sql));
  const named = (sql: string) =>
    ["due", "dead_letter", "aging_base", "aging_every", "aging_max"].filter((c) =>
      new RegExp(`\\b${c}\\b`).test(sql.slice(0, sql.search(/\)\s*(VALUES|SELECT)/i))),
    );

  it("plain jobs name no optional column, one by one or in bulk", async () => {
    const { db, sent } = counting(t);
    await enqueue("columns.plain", { n: 1 }, { db, queue: "columns" });
    await enqueueMany(
      [1, 2].map((n) => ({ task: "columns.plain", payload: { n } })),
      { db, queue: "columns" },
    );
    expect(inserts(sent)).toHaveLength(2);
    for (const sql of inserts(sent)) expect(named(sql)).toEqual([]);
  });

  it("a chunk names the columns its jobs need, and the others in it get the defaults", async () => {
    const { db, sent } = counting(t);
    const ids = await enqueueMany(
      [
        { task: "columns.plain", payload: null },
        { task: "columns.later", payload: null, availableIn: 3600 },
        { task: "columns.dead", payload: null, deadLetter: "columns-dead" },
        { task: "columns.aged", payload: null, priority: 1, priorityAging: { everySeconds: 60, max: 5 } },
      ],
      { db, queue: "columns" },
    );
    expect(inserts(sent)).toHaveLength(1);
    expect(named(inserts(sent)[0]!)).toEqual(["due", "dead_letter", "aging_base", "aging_every", "aging_max"]);
    const { rows } = await t.db.executor.query<{ id: number; due: unknown; dead_letter: string | null; aging_base: number | null; aging_every: number | null }>(
      `SELECT id, due, dead_letter, aging_base, aging_every FROM ${t.db.table} WHERE ${t.db.sql.inList("id", "$1")} ORDER BY id`,
      [ids],
    );
    expect(rows.map((r) => [Boolean(Number(r.due === true ? 1 : r.due === false ? 0 : r.due)), r.dead_letter, r.aging_base, r.aging_every])).toEqual([
      [true, null, null, null],
      [false, null, null, null],
      [true, "columns-dead", null, null],
      [true, null, 1, 60],
    ]);
  });
});
