// Found by steps-kill.test.ts on PostgreSQL: a run's handler starts as soon as its start write
// (the one that counts the attempt) has left, so its first step can be saved before that write
// commits. The step's row must still name the run's attempt, not the one before it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue } from "../../src/index.js";
import { claimJobs } from "../../src/run/claim.js";
import { saveStep } from "../../src/run/step-store.js";
import { backends, type TestDatabase } from "../helpers/backends.js";

describe.each(backends())("a step saved before its run's start write lands ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await backend.create();
  });
  afterAll(() => t.close());

  it("names the run's attempt, as the start write will count it", async () => {
    const queue = "ahead-of-start";
    const id = await enqueue("stepped", null, { db: t.db, queue });
    // Claimed and held unstarted (attempts still 0), as a run whose start write is in flight.
    const [job] = (await claimJobs(t.db, { queues: [queue], limit: 1, start: 0, lease: 60, workerId: "ahead" })).jobs;
    expect(job).toMatchObject({ id, started: false, attempt: 1 });
    const row = { name: "s1", kind: "step" as const, result: "1", durationMs: 0, wake: null };
    expect(await saveStep(t.db, t.db.executor, job!, row)).toBe(true);
    const [saved] = await t.sql<{ attempt: number | string }>(`SELECT attempt FROM ${t.tableName("jobs_steps")} WHERE job_id = $1`, [id]);
    expect(Number(saved!.attempt)).toBe(job!.attempt);
  });
});
