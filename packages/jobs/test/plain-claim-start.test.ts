// The plain claim (claim.ts) starts the first `start` jobs it takes, in claim order, and holds
// the rest unstarted (start.ts): SQLite words the claim differently for none, some or all.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimJobs } from "../src/run/claim.js";
import { enqueueMany } from "../src/index.js";
import { backends, uniqueName, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("the plain claim's starts ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  for (const start of [0, 2, 5]) {
    it(`starting ${start} of 5 over two queues starts the first ${start} in claim order; the others hold their attempt`, async () => {
      const [low, high] = [uniqueName("low"), uniqueName("high")];
      await enqueueMany(
        [0, 1, 2].map((i) => ({ task: "t", payload: i })),
        { db: t.db, queue: low },
      );
      await enqueueMany(
        [0, 1, 2].map((i) => ({ task: "t", payload: i, priority: i === 1 ? 5 : 1 })),
        { db: t.db, queue: high },
      );
      const { jobs } = await claimJobs(t.db, { queues: [low, high], limit: 5, start, lease: 60, workerId: uniqueName("w") });
      expect(jobs.map((j) => [j.queue, j.payload])).toEqual([
        [high, 1],
        [high, 0],
        [high, 2],
        [low, 0],
        [low, 1],
      ]);
      expect(jobs.map((j) => j.started)).toEqual(jobs.map((_, i) => i < start));
      expect(jobs.every((j) => j.attempt === 1)).toBe(true);
      const rows = await t.sql<{ id: number | string; attempts: number | string; started: number | string }>(
        `SELECT id, attempts, CASE WHEN started_at IS NULL THEN 0 ELSE 1 END AS started FROM {jobs} WHERE queue IN ($1, $2) AND status = 'running'`,
        [low, high],
      );
      const byId = new Map(rows.map((r) => [Number(r.id), [Number(r.attempts), Number(r.started)]]));
      expect(jobs.map((j) => byId.get(j.id))).toEqual(jobs.map((_, i) => (i < start ? [1, 1] : [0, 0])));
    });
  }
});
