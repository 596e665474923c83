// A worker must stay fast whatever plan PostgreSQL could keep for its statements. A named
// prepared statement gets a generic plan after five runs; made while the jobs table held a page
// or two, that plan is a sequential scan (the cheapest way to read so little), and nothing
// replaces it while no VACUUM or ANALYZE touches the table (autovacuum off, or held back by a
// long transaction). Under sustained load each completion then walked the whole table, slower
// as the table grew, until leases ran out and the worker completed nothing at all.
//
// Each queue here has one connection, so the plans its first rounds leave behind are the ones
// its last round gets: on a pool the queue opened itself (named statements) and on a client the
// application lends (whose session plans as it was told to).
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, enqueueMany, statusCounts, type JobsDatabase } from "../src/index.js";
import { fromDriver } from "../src/core/connect.js";
import { claimJobs } from "../src/run/claim.js";
import { completeRuns } from "../src/run/complete.js";
import { failJob } from "../src/run/fail.js";
import { extendLeases } from "../src/run/lease.js";
import { reclaimJobs } from "../src/maintenance/reclaim.js";
import { sendStarts } from "../src/run/start.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

const GROWN = 200_000;

const STATISTICS = [
  { statistics: "none (never analyzed)", analyze: false },
  { statistics: "taken while it was empty", analyze: true },
];

describe.each(backends().filter((b) => b.name === "postgres"))("plans made while the table was small ($name)", (backend) => {
  let t: TestDatabase;
  let ours: JobsDatabase;
  let client: pg.Client;
  let lent: JobsDatabase;

  beforeAll(async () => {
    t = await backend.create();
    ours = connect(t.url, { schema: t.schema, poolSize: 1 });
    client = new pg.Client({ connectionString: t.url });
    await client.connect();
    lent = fromDriver(client, { schema: t.schema });
  });
  afterAll(async () => {
    await ours?.close();
    await client?.end();
    await t?.close();
  });

  /** Rows this connection's statements read by sequential scans of the jobs table so far. */
  async function readSequentially(db: JobsDatabase): Promise<number> {
    // Flushed at the end of this statement's transaction, so the next one reads this backend's counts.
    await db.executor.query("SELECT pg_stat_force_next_flush()");
    const { rows } = await db.executor.query<{ n: string }>(`SELECT seq_tup_read AS n FROM pg_stat_user_tables WHERE relid = '${t.db.table}'::regclass`);
    return Number(rows[0]!.n);
  }

  /** One job of `queue` through each write a worker makes: claim, start, lease, done, failed, reclaimed, counted. */
  async function oneRound(db: JobsDatabase, queue: string): Promise<void> {
    const claimed = (await claimJobs(db, { queues: [queue], limit: 4, start: 0, lease: 30, workerId: "plans" })).jobs;
    expect(claimed).toHaveLength(4);
    const [ok, retried, lost, held] = claimed as [(typeof claimed)[0], (typeof claimed)[0], (typeof claimed)[0], (typeof claimed)[0]];
    expect((await sendStarts(db, null, claimed, 30).owned).size).toBe(4);
    expect((await extendLeases(db, claimed, 30)).size).toBe(4);
    expect((await completeRuns(db, [{ id: ok.id, token: ok.token, result: null }])).size).toBe(1);
    expect(await failJob(db, retried.id, retried.token, { kind: "fail" }, "boom")).toBe(true);
    await t.sql(`UPDATE {jobs} SET heartbeat_at = heartbeat_at - interval '1 hour' WHERE id = $1`, [lost.id]);
    expect((await reclaimJobs(db, 60, queue)).map((j) => j.id)).toEqual([lost.id]);
    expect((await completeRuns(db, [{ id: held.id, token: held.token, result: null }])).size).toBe(1);
    await statusCounts({ db, queue });
  }

  it.each(STATISTICS)(
    "the claim, start, lease extension, completion, failure, reclaim and counts do not walk the table it grew into; statistics: $statistics",
    async ({ analyze }) => {
      await t.sql("TRUNCATE {jobs}");
      if (analyze) await t.sql("ANALYZE {jobs}");
      const queues = { ours: "ours", lent: "lent" };
      for (const queue of Object.values(queues)) {
        await enqueueMany(
          Array.from({ length: 4 * 10 }, (_, i) => ({ task: "plan", payload: { i } })),
          { db: t.db, queue },
        );
      }
      // Nine rounds on each connection: past the five runs after which PostgreSQL may keep a generic plan.
      for (let i = 0; i < 9; i++) {
        await oneRound(ours, queues.ours);
        await oneRound(lent, queues.lent);
      }
      await t.sql(`INSERT INTO {jobs} (queue, task, payload, status) SELECT 'elsewhere', 'filler', '{}', 'pending' FROM generate_series(1, ${GROWN})`);

      for (const [db, queue] of [
        [ours, queues.ours],
        [lent, queues.lent],
      ] as const) {
        const before = await readSequentially(db);
        await oneRound(db, queue);
        // One walk of the table reads its 200,000 rows; index paths read none sequentially.
        expect(await readSequentially(db), `rows of the grown table read sequentially, queue "${queue}"`).toBeLessThan(before + 1_000);
      }
    },
    120_000,
  );

  it("the queue's own connections plan each run: its pool, its transactions and a worker's start writer", async () => {
    const setting = "SELECT current_setting('plan_cache_mode') AS mode";
    expect((await ours.executor.query<{ mode: string }>(setting)).rows[0]!.mode).toBe("force_custom_plan");
    expect(await ours.executor.transaction(async (tx) => (await tx.query<{ mode: string }>(setting)).rows[0]!.mode)).toBe("force_custom_plan");
    const sender = ours.executor.orderedSender!();
    try {
      expect((await sender.send<{ mode: string }>(setting, []).result).rows[0]!.mode).toBe("force_custom_plan");
    } finally {
      await sender.close();
    }
    // The application's connection keeps its own setting: the queue names no statement on it.
    expect((await lent.executor.query<{ mode: string }>(setting)).rows[0]!.mode).toBe("auto");
  });
});
