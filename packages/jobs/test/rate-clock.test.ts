// A rate-limited key's bucket after the database clock stepped back (a backwards NTP step):
// its refilled_at lies ahead of now(). The bucket must refill from now on, not from that
// instant in the future. Limits are set with setLimit; the step is made by SQL. All backends.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimJobs } from "../src/run/claim.js";
import { enqueueMany, setLimit } from "../src/index.js";
import { backends, uniqueName, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("a rate limit after the clock stepped back ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const claim = (queue: string) => claimJobs(t.db, { queues: [queue], limit: 10, start: 10, lease: 60, workerId: uniqueName("w") });

  it("a bucket refilled 'an hour from now' gives its next token within the rate's interval, and its refill time is brought back to now", async () => {
    const queue = uniqueName("stepped");
    const key = uniqueName("api");
    // One token every 2 s.
    const intervalMs = 2000;
    await setLimit(key, { rate: { limit: 1, perSeconds: intervalMs / 1000, burst: 1 } }, { db: t.db });
    await enqueueMany(
      Array.from({ length: 3 }, () => ({ task: "t", concurrencyKey: key })),
      { db: t.db, queue },
    );
    expect((await claim(queue)).jobs).toHaveLength(1);
    // The bucket is empty; the clock then steps back an hour: its last refill is an hour ahead.
    await t.sql(`UPDATE ${t.db.keysTable} SET tokens = 0, refilled_at = ${t.db.sql.nowPlus("3600")} WHERE concurrency_key = $1`, [key]);
    const stepped = Date.now();
    await waitFor("a job of the stepped key to be claimed", async () => (await claim(queue)).jobs.length === 1, intervalMs, 50);
    expect(Date.now() - stepped).toBeLessThanOrEqual(intervalMs + 500);
    const [row] = await t.sql<{ ahead: number | string }>(
      `SELECT count(*) AS ahead FROM ${t.db.keysTable} WHERE concurrency_key = $1 AND refilled_at > ${t.db.sql.now}`,
      [key],
    );
    expect(Number(row!.ahead)).toBe(0);
    // The rate still holds: the third job waits for the next token.
    expect((await claim(queue)).jobs).toEqual([]);
  });
});
