// Point 4 of the reliability issue: races the database must close. Concurrent enqueues with one
// idempotency key, or one dedup key while its job runs (and while it ends), and reclaim run by
// five processes — or five connections — at the same instant.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, enqueue, enqueueMany, getJob, processOne, reclaim, type JobsDatabase } from "../../src/index.js";
import { claimJobs } from "../../src/run/claim.js";
import { backends, deferred, waitFor, type TestDatabase } from "../helpers/backends.js";
import { Child, fixture, killAll } from "./helpers/children.js";
import { count, jobRows } from "./helpers/queue.js";
import { scaled, timeoutMs } from "./helpers/scale.js";

const ROUNDS = scaled(30, 100);
const CONCURRENT = 20;
const RECLAIM_ROUNDS = scaled(5, 20);
const RECLAIMERS = 5;
const EXPIRED = scaled(400, 2000);

/** `n` calls at once; every one must succeed. */
async function all<T>(n: number, call: (i: number) => Promise<T>): Promise<T[]> {
  const settled = await Promise.allSettled(Array.from({ length: n }, (_, i) => call(i)));
  const failures = settled.flatMap((s) => (s.status === "rejected" ? [s.reason as unknown] : []));
  expect(failures).toEqual([]);
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

describe.each(backends())("races ($name)", (backend) => {
  let t: TestDatabase;
  const children: Child[] = [];
  beforeAll(async () => (t = await backend.create()));
  afterAll(async () => {
    await killAll(children);
    await t.close();
  });

  it(
    `${ROUNDS} rounds of ${CONCURRENT} concurrent enqueues with one idempotency key: one job per round, no error`,
    async () => {
      const before = await jobRows(t);
      for (let round = 0; round < ROUNDS; round++) {
        const key = `idem-${round}`;
        const ids = await all(CONCURRENT, (i) => enqueue("idem", { round, caller: i }, { db: t.db, queue: "idem", idempotencyKey: key }));
        expect(new Set(ids).size).toBe(1);
        expect(await count(t, "SELECT count(*) AS n FROM {all} WHERE idempotency_key = $1", [key])).toBe(1);
        // The winner's payload is one of the callers', stored whole.
        expect((await getJob(ids[0]!, { db: t.db }))!.payload).toMatchObject({ round });
      }
      expect(await jobRows(t)).toBe(before + ROUNDS);
    },
    timeoutMs(60, 300),
  );

  it(
    `${ROUNDS} rounds with one dedupKey while its job runs, and while it ends: at most one active job, no error`,
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const key = `dedup-${round}`;
        const queue = `dedup-${round}`;
        const options = { db: t.db, queue, dedupKey: key };
        const first = await enqueue("dedup", { round }, options);
        const started = deferred();
        const release = deferred();
        const run = processOne(
          {
            dedup: async () => {
              started.resolve();
              await release.promise;
            },
          },
          { db: t.db, queue },
        );
        await started.promise;
        // While it runs: everyone gets the running job.
        expect(new Set(await all(CONCURRENT, () => enqueue("dedup", { round }, options)))).toEqual(new Set([first]));
        // While it ends: the residual race. Each caller gets the old job or the single new one.
        const racing = all(CONCURRENT, () => enqueue("dedup", { round }, options));
        release.resolve();
        const [ids] = await Promise.all([racing, run]);
        const distinct = new Set(ids);
        const fresh = [...distinct].filter((id) => id !== first);
        expect(fresh.length).toBeLessThanOrEqual(1);
        expect((await getJob(first, { db: t.db }))!.status).toBe("done");
        const active = () => count(t, "SELECT count(*) AS n FROM {jobs} WHERE dedup_key = $1 AND status IN ('pending', 'running')", [key]);
        expect(await active()).toBe(fresh.length);
        // Once it has ended: exactly one new job for the next wave, whoever asks.
        const after = new Set(await all(CONCURRENT, () => enqueue("dedup", { round }, options)));
        expect(after.size).toBe(1);
        if (fresh.length) expect(after).toEqual(new Set(fresh));
        expect(await active()).toBe(1);
        expect(await count(t, "SELECT count(*) AS n FROM {all} WHERE dedup_key = $1", [key])).toBe(2);
      }
    },
    timeoutMs(90, 400),
  );

  /** In a queue of their own: `expired` jobs whose lease ran out (some with no attempt left), plus `live` ones still leased. */
  async function lostJobs(queue: string, expired: number, live: number): Promise<{ expired: Set<number>; live: number[] }> {
    await enqueueMany(
      Array.from({ length: expired + live }, (_, i) => ({ task: "lost", maxAttempts: i % 4 === 0 ? 1 : 3 })),
      { db: t.db, queue },
    );
    const gone = (await claimJobs(t.db, { queues: [queue], limit: expired, start: expired, lease: 0.001, workerId: "dead-worker" })).jobs;
    const kept = (await claimJobs(t.db, { queues: [queue], limit: live, start: live, lease: 600, workerId: "live-worker" })).jobs;
    const lockedUntil = Math.max(
      ...(await Promise.all(gone.map(async (j) => ((await getJob(j.id, { db: t.db })) as { lockedUntil: Date }).lockedUntil.getTime()))),
    );
    await waitFor("the dead worker's leases to run out", async () => (await t.now()).getTime() > lockedUntil);
    return { expired: new Set(gone.map((j) => j.id)), live: kept.map((j) => j.id) };
  }

  it(
    `reclaim in ${RECLAIMERS} processes at once, ${RECLAIM_ROUNDS} rounds: each expired job reclaimed exactly once`,
    async () => {
      const reclaimers = Array.from({ length: RECLAIMERS }, (_, i) => new Child(`reclaimer${i}`, [fixture("reclaimer.ts"), t.url, t.schema ?? ""]));
      children.push(...reclaimers);
      await Promise.all(reclaimers.map((r) => r.waitForMessage("ready", (m) => m.type === "ready")));
      const shares: number[][] = []; // per round, how many each process took: shows they really raced
      for (let round = 0; round < RECLAIM_ROUNDS; round++) {
        const queue = `reclaim-procs-${round}`;
        // Enough rows that the five statements overlap in time rather than run one after another.
        const { expired, live } = await lostJobs(queue, EXPIRED, 5);
        for (const r of reclaimers) r.send(`go ${round} ${queue}`); // as close to "at once" as five processes get
        const answers = await Promise.all(reclaimers.map((r) => r.waitForMessage(`round ${round}`, (m) => m.round === round)));
        expect(answers.filter((a) => a.type !== "reclaimed")).toEqual([]);
        const taken = answers.flatMap((a) => a.ids as number[]);
        shares.push(answers.map((a) => (a.ids as number[]).length));
        expect(taken.length).toBe(expired.size); // no job twice …
        expect(new Set(taken)).toEqual(expired); // … and every expired one, and no live one
        for (const id of live) expect((await getJob(id, { db: t.db }))!.status).toBe("running");
      }
      console.info(`[reliability] ${backend.name}: jobs reclaimed by each of ${RECLAIMERS} processes per round: ${shares.map((s) => s.join("/")).join(", ")}`);
      for (const r of reclaimers) r.proc.stdin!.end();
      expect((await Promise.all(reclaimers.map((r) => r.exited))).map((e) => e.code)).toEqual(reclaimers.map(() => 0));
    },
    timeoutMs(90, 400),
  );

  it(
    `reclaim on ${RECLAIMERS} connections at once, ${RECLAIM_ROUNDS} rounds: each expired job reclaimed exactly once`,
    async () => {
      const connections: JobsDatabase[] = Array.from({ length: RECLAIMERS }, () => connect(t.url, t.schema ? { schema: t.schema } : {}));
      try {
        await Promise.all(connections.map((db) => db.executor.query("SELECT 1")));
        for (let round = 0; round < RECLAIM_ROUNDS; round++) {
          const queue = `reclaim-conns-${round}`;
          const { expired, live } = await lostJobs(queue, EXPIRED, 5);
          const answers = await all(RECLAIMERS, (i) => reclaim({ db: connections[i]!, queue }));
          const taken = answers.flat().map((j) => j.id);
          expect(taken.length).toBe(expired.size);
          expect(new Set(taken)).toEqual(expired);
          for (const id of live) expect((await getJob(id, { db: t.db }))!.status).toBe("running");
        }
      } finally {
        await Promise.all(connections.map((db) => db.close()));
      }
    },
    timeoutMs(60, 300),
  );
});
