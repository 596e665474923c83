import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, getJob, JobError, retryJob } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("cancelJob and retryJob ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  async function fail(id: number): Promise<void> {
    await t.sql("UPDATE {jobs} SET status = 'failed', last_error = 'boom', finished_at = updated_at WHERE id = $1", [id]);
  }

  it("retryJob on a failed job whose dedup key another active job now holds is a JobError naming that job (audit 12.11)", async () => {
    const first = await enqueue("sync", null, { db: t.db, queue: "admin", dedupKey: "admin-sync" });
    await fail(first);
    const holder = await enqueue("sync", null, { db: t.db, queue: "admin", dedupKey: "admin-sync" });
    expect(holder).not.toBe(first);
    const error = await retryJob(first, { db: t.db }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobError);
    expect((error as Error).message).toMatch(new RegExp(`job ${first} .*dedupKey "admin-sync".* job ${holder}`));
    expect((await getJob(first, { db: t.db }))!.status).toBe("failed");
    // Once the holder ends, the key is free and the retry goes through.
    expect(await cancelJob(holder, { db: t.db })).toBe(true);
    expect(await retryJob(first, { db: t.db })).toBe(true);
    expect((await getJob(first, { db: t.db }))!.status).toBe("pending");
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
