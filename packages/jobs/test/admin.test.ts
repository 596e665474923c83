import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, getJob, JobError, processOne, retryJob, statusCounts } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";
import { recount } from "./helpers/legacy-rows.js";

describe.each(backends())("cancelJob and retryJob ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  /** Fails a job as an older version left it: a legacy ended row of the live table, counted. */
  async function failLegacy(id: number, _queue: string): Promise<void> {
    await t.sql("UPDATE {jobs} SET status = 'failed', last_error = 'boom', finished_at = updated_at WHERE id = $1", [id]);
    await recount(t);
  }

  /** Fails a job as a worker does: it ends in the history table. */
  async function failInHistory(id: number, queue: string): Promise<void> {
    expect(await processOne({ sync: () => Promise.reject(Object.assign(new Error("boom"), { retryable: false })) }, { db: t.db, queue })).toBe(true);
    expect(await t.sql("SELECT id FROM {history} WHERE id = $1", [id])).toHaveLength(1);
  }

  it.each([
    ["a legacy row of the live table", failLegacy, "admin"],
    ["in the history table", failInHistory, "admin-history"],
  ])("retryJob on a failed job (%s) whose dedup key another active job now holds is a JobError naming that job (audit 12.11)", async (_where, fail, queue) => {
    const first = await enqueue("sync", null, { db: t.db, queue, dedupKey: "admin-sync" });
    await fail(first, queue);
    const holder = await enqueue("sync", null, { db: t.db, queue, dedupKey: "admin-sync" });
    expect(holder).not.toBe(first);
    const error = await retryJob(first, { db: t.db }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobError);
    expect((error as Error).message).toMatch(new RegExp(`job ${first} .*dedupKey "admin-sync".* job ${holder}`));
    expect((await getJob(first, { db: t.db }))!.status).toBe("failed");
    // Once the holder ends, the key is free and the retry goes through.
    expect(await cancelJob(holder, { db: t.db })).toBe(true);
    expect(await retryJob(first, { db: t.db })).toBe(true);
    expect((await getJob(first, { db: t.db }))!.status).toBe("pending");
    expect((await statusCounts({ db: t.db, queue }))[0]!.counts).toMatchObject({ pending: 1, failed: 0, cancelled: 1 });
    expect(await cancelJob(first, { db: t.db })).toBe(true);
  });

  const badIds: [string, unknown][] = [
    ["NaN", NaN],
    ["a fraction", 1.5],
    ["a numeric string", "3"],
    ["a negative number", -1],
    ["zero", 0],
    ["Infinity", Infinity],
    ["an unsafe integer", 2 ** 53],
  ];

  it.each(badIds)("getJob, cancelJob and retryJob refuse an id that is %s with a JobError (audit 12.11)", async (_what, id) => {
    const existing = await enqueue("t", null, { db: t.db, queue: "ids" });
    for (const [name, call] of [
      ["getJob", () => getJob(id as number, { db: t.db })],
      ["cancelJob", () => cancelJob(id as number, { db: t.db })],
      ["retryJob", () => retryJob(id as number, { db: t.db })],
    ] as const) {
      const error = await call().then(
        (value) => ({ resolved: value }),
        (e: unknown) => e,
      );
      expect(error, name).toBeInstanceOf(JobError);
      expect((error as Error).message, name).toMatch(/id must be a job id \(a positive integer\)/);
    }
    expect((await getJob(existing, { db: t.db }))!.status).toBe("pending");
  });
});
