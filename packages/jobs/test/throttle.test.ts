// Throttle windows (`{ throttle: { key, seconds } }`): at most one job per key per fixed slot of
// the database clock, later enqueues in the slot answered with its id. Windows are chosen by
// reading the database clock, never by timing the test: a long window the clock is in the middle
// of for "same window", a 1-second one waited out by polling the clock for "next window".
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, enqueueMany, JobError } from "../src/index.js";
import { enqueueBatch } from "../src/enqueue/batch-enqueue.js";
import { databaseEpochSeconds, MAX_THROTTLE_KEY_LENGTH, MAX_THROTTLE_SECONDS } from "../src/enqueue/throttle.js";
import { backends, uniqueName, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("throttle windows ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const now = () => databaseEpochSeconds(t.db, t.db.executor);
  const count = async (queue: string) => Number((await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all} WHERE queue = $1", [queue]))[0]!.n);

  /** A window length (over 1,000 s) whose current slot the clock is in the middle of: minutes pass before it ends. */
  async function midWindow(): Promise<number> {
    const at = await now();
    for (let seconds = 1000; ; seconds++) if (at % seconds >= seconds / 4 && at % seconds <= (3 * seconds) / 4) return seconds;
  }

  it("one job per key in a window: the later enqueues get its id, another key gets its own job", async () => {
    const queue = uniqueName("tq");
    const seconds = await midWindow();
    const first = await enqueue("report", { n: 1 }, { db: t.db, queue, throttle: { key: "org:1", seconds } });
    const again = await enqueue("report", { n: 2 }, { db: t.db, queue, throttle: { key: "org:1", seconds } });
    const other = await enqueue("report", { n: 3 }, { db: t.db, queue, throttle: { key: "org:2", seconds } });
    expect(again).toBe(first);
    expect(other).not.toBe(first);
    expect(await count(queue)).toBe(2);
    const [row] = await t.sql<{ idempotency_key: string; payload: unknown }>("SELECT idempotency_key, payload FROM {all} WHERE id = $1", [first]);
    expect(row!.idempotency_key).toMatch(new RegExp(`^throttle:org:1:${seconds}:\\d+$`));
  });

  it("a job that has already ended still holds its window", async () => {
    const queue = uniqueName("tq-ended");
    const seconds = await midWindow();
    const first = await enqueue("report", null, { db: t.db, queue, throttle: { key: "ended", seconds } });
    expect(await cancelJob(first, { db: t.db })).toBe(true);
    const [row] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {history} WHERE id = $1", [first]);
    expect(Number(row!.n)).toBe(1);
    expect(await enqueue("report", null, { db: t.db, queue, throttle: { key: "ended", seconds } })).toBe(first);
    expect(await count(queue)).toBe(1);
  });

  it("the next window gives a new job", async () => {
    const queue = uniqueName("tq-next");
    const first = await enqueue("tick", null, { db: t.db, queue, throttle: { key: "k", seconds: 1 } });
    const [row] = await t.sql<{ idempotency_key: string }>("SELECT idempotency_key FROM {all} WHERE id = $1", [first]);
    const slot = Number(row!.idempotency_key.split(":").pop());
    await waitFor("the database clock to pass the first job's window", async () => (await now()) > slot, 10_000, 50);
    const second = await enqueue("tick", null, { db: t.db, queue, throttle: { key: "k", seconds: 1 } });
    expect(second).not.toBe(first);
    expect(await count(queue)).toBe(2);
  });

  it("50 concurrent enqueues of one key in one window make one job, and every caller gets its id", async () => {
    const queue = uniqueName("tq-race");
    const seconds = await midWindow();
    const ids = await Promise.all(Array.from({ length: 50 }, (_, i) => enqueue("race", { i }, { db: t.db, queue, throttle: { key: "race", seconds } })));
    expect(new Set(ids).size).toBe(1);
    expect(await count(queue)).toBe(1);
  });

  it("enqueueMany throttles per item, within the call and against earlier jobs", async () => {
    const queue = uniqueName("tq-many");
    const seconds = await midWindow();
    const before = await enqueue("m", null, { db: t.db, queue, throttle: { key: "a", seconds } });
    const ids = await enqueueMany(
      [
        { task: "m", throttle: { key: "a", seconds } },
        { task: "m", throttle: { key: "b", seconds } },
        { task: "m", throttle: { key: "b", seconds } },
        { task: "m" },
      ],
      { db: t.db, queue },
    );
    expect(ids[0]).toBe(before);
    expect(ids[2]).toBe(ids[1]);
    expect(new Set(ids).size).toBe(3);
    expect(await count(queue)).toBe(3);
  });

  it("inside a caller's transaction: the window's job is the caller's, gone with its rollback", async () => {
    const queue = uniqueName("tq-tx");
    const seconds = await midWindow();
    const [a, b] = await t.withTransaction(async (bound) => {
      const first = await enqueue("tx", null, { db: bound, queue, throttle: { key: "tx", seconds } });
      return [first, await enqueue("tx", null, { db: bound, queue, throttle: { key: "tx", seconds } })];
    }, "rollback");
    expect(b).toBe(a);
    expect(await count(queue)).toBe(0);
    // The window is free again: the rolled-back job never held it.
    const after = await enqueue("tx", null, { db: t.db, queue, throttle: { key: "tx", seconds } });
    expect(await count(queue)).toBe(1);
    const committed = await t.withTransaction((bound) => enqueue("tx", null, { db: bound, queue, throttle: { key: "tx", seconds } }), "commit");
    expect(committed).toBe(after);
  });

  it.each([
    ["not an object", { throttle: "org:1" }, /throttle must be an object \{ key, seconds \}/],
    ["an empty key", { throttle: { key: "", seconds: 60 } }, /throttle\.key must be a non-empty string/],
    ["a number as key", { throttle: { key: 7, seconds: 60 } }, /throttle\.key must be a non-empty string/],
    ["a key over 200 characters", { throttle: { key: "x".repeat(MAX_THROTTLE_KEY_LENGTH + 1), seconds: 60 } }, /throttle\.key must be at most 200 characters/],
    ["no seconds", { throttle: { key: "k" } }, /throttle\.seconds must be an integer from 1 to/],
    ["0 seconds", { throttle: { key: "k", seconds: 0 } }, /throttle\.seconds must be an integer from 1 to/],
    ["1.5 seconds", { throttle: { key: "k", seconds: 1.5 } }, /throttle\.seconds must be an integer from 1 to/],
    ["over 366 days", { throttle: { key: "k", seconds: MAX_THROTTLE_SECONDS + 1 } }, /throttle\.seconds must be an integer from 1 to 31622400/],
    ["an unknown field", { throttle: { key: "k", seconds: 60, every: 2 } }, /throttle: unknown option "every"/],
    ["with an idempotencyKey", { throttle: { key: "k", seconds: 60 }, idempotencyKey: "i" }, /throttle cannot be combined with idempotencyKey/],
    ["with a dedupKey", { throttle: { key: "k", seconds: 60 }, dedupKey: "d" }, /throttle cannot be combined with dedupKey/],
  ])("bad input (%s) is a JobError saying what to fix, and nothing is written", async (_label, options, message) => {
    const queue = uniqueName("tq-bad");
    const call = { db: t.db, queue, ...options } as unknown as Parameters<typeof enqueue>[2];
    await expect(enqueue("bad", null, call)).rejects.toThrow(JobError);
    await expect(enqueue("bad", null, call)).rejects.toThrow(message);
    const items = [{ task: "ok" }, { task: "bad", ...options }] as unknown as Parameters<typeof enqueueMany>[0];
    await expect(enqueueMany(items, { db: t.db, queue })).rejects.toThrow(/items\[1\]\.throttle|items\[1\]\.(idempotencyKey|dedupKey)/);
    expect(await count(queue)).toBe(0);
  });

  it("a flow job or a batch item cannot be throttled", async () => {
    const queue = uniqueName("tq-flow");
    const dep = await enqueue("d", null, { db: t.db, queue });
    await expect(enqueue("f", null, { db: t.db, queue, dependsOn: [dep], throttle: { key: "f", seconds: 60 } })).rejects.toThrow(
      /cannot also have an idempotencyKey, dedupKey or throttle/,
    );
    await expect(enqueueBatch([{ task: "b", throttle: { key: "b", seconds: 60 } }], { db: t.db, queue })).rejects.toThrow(
      /items\[0\]\.throttle: a batch's items cannot have keys/,
    );
    expect(await count(queue)).toBe(1);
  });
});
