// Issue 14 point 1 under a race: claimers on separate connections reach for one limited key at
// the same instant, some of them with a key already partly full. A key's running jobs are
// counted under its row lock (key-locks.ts); counted from an older snapshot, or without the
// lock, each claimer would fill the key's slots anew.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completeRuns } from "../../src/run/complete.js";
import { claimJobs, type ClaimedJob } from "../../src/run/claim.js";
import { connect, enqueueMany, setLimit, type JobsDatabase } from "../../src/index.js";
import { backends, uniqueName, type TestDatabase } from "../helpers/backends.js";
import { count } from "./helpers/queue.js";
import { scaled, timeoutMs } from "./helpers/scale.js";

const CLAIMERS = 8;
const ROUNDS = scaled(15, 60);
const LIMIT = 3;

describe.each(backends())("claims of one limited key at once ($name)", (backend) => {
  let t: TestDatabase;
  let connections: JobsDatabase[];
  beforeAll(async () => {
    t = await backend.create();
    connections = Array.from({ length: CLAIMERS }, () => connect(t.url, t.schema ? { schema: t.schema } : {}));
    await Promise.all(connections.map((db) => db.executor.query("SELECT 1")));
  });
  afterAll(async () => {
    await Promise.all(connections.map((db) => db.close()));
    await t.close();
  });

  it(
    `${CLAIMERS} claimers, ${ROUNDS} rounds: never more than the key's limit running, whoever claimed before`,
    async () => {
      const queue = uniqueName("race");
      const key = `${queue}:smtp`;
      await setLimit(key, { concurrency: LIMIT }, { db: t.db });
      await enqueueMany(
        Array.from({ length: 200 }, (_, i) => ({ task: "t", payload: i, concurrencyKey: key, group: `g${i % 4}` })),
        { db: t.db, queue },
      );
      let held: { db: JobsDatabase; job: ClaimedJob }[] = [];
      let claimedInAll = 0;
      for (let round = 0; round < ROUNDS; round++) {
        // Some rounds start with the key partly full: the running jobs a snapshot counts matter too.
        const keep = round % 3 === 0 ? [] : held.slice(0, round % LIMIT);
        const done = held.filter((h) => !keep.includes(h));
        for (const h of done) await completeRuns(h.db, [{ id: h.job.id, token: h.job.token, result: null }]);
        const answers = await Promise.all(
          connections.map(async (db, i) => ({
            db,
            // Half skip the one-statement claim (as after a key with a limit was met): both
            // kinds must see each other's claims.
            jobs: (await claimJobs(db, { queues: [queue], limit: 5, start: 5, lease: 60, workerId: `claimer-${i}`, limited: i % 2 === 0 })).jobs,
          })),
        );
        const taken = answers.flatMap((a) => a.jobs.map((job) => ({ db: a.db, job })));
        const running = await count(t, `SELECT count(*) AS n FROM {jobs} WHERE status = 'running' AND concurrency_key = $1`, [key]);
        expect({ round, running, taken: taken.length }).toEqual({ round, running: LIMIT, taken: LIMIT - keep.length });
        held = [...keep, ...taken];
        claimedInAll += taken.length;
      }
      expect(claimedInAll).toBeGreaterThan(ROUNDS);
    },
    timeoutMs(60, 300),
  );
});
