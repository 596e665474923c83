// The start write (start.ts) answers with the held jobs still ours: one taken over while it
// waited in the buffer is left alone and left out, and a write sent again counts nothing twice.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimJobs } from "../src/run/claim.js";
import { enqueueMany } from "../src/index.js";
import { sendStarts } from "../src/run/start.js";
import { backends, uniqueName, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("the start write's answer ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  async function attempts(queue: string): Promise<[number, number][]> {
    const rows = await t.sql<{ id: number | string; attempts: number | string }>(`SELECT id, attempts FROM {all} WHERE queue = $1 ORDER BY id`, [queue]);
    return rows.map((r) => [Number(r.id), Number(r.attempts)]);
  }

  it("names every held job when all are still ours, and only those still ours after a takeover", async () => {
    const queue = uniqueName("start");
    await enqueueMany(
      [0, 1, 2].map((i) => ({ task: "t", payload: i })),
      { db: t.db, queue },
    );
    const { jobs } = await claimJobs(t.db, { queues: [queue], limit: 3, start: 0, lease: 60, workerId: uniqueName("w") });
    expect(jobs.map((j) => j.started)).toEqual([false, false, false]);
    const [first, taken, last] = jobs as [(typeof jobs)[0], (typeof jobs)[0], (typeof jobs)[0]];

    // Another claimer took the second job over: its token is no longer ours.
    await t.sql(`UPDATE {jobs} SET claim_token = $1 WHERE id = $2`, ["00000000-0000-4000-8000-000000000001", taken.id]);
    const answer = await sendStarts(t.db, null, [last, taken, first], 60).owned;
    expect([...answer].sort()).toEqual([first.token, last.token].sort());
    expect(await attempts(queue)).toEqual([
      [first.id, 1],
      [taken.id, 0],
      [last.id, 1],
    ]);

    // Sent again (a reply lost): the same answer, no attempt counted twice.
    expect([...(await sendStarts(t.db, null, [first, last], 60).owned)].sort()).toEqual([first.token, last.token].sort());
    expect(await attempts(queue)).toEqual([
      [first.id, 1],
      [taken.id, 0],
      [last.id, 1],
    ]);
  });
});
