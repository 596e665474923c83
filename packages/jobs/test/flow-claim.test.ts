// The fair claim (fair-claim.ts): fair share between groups, concurrency and rate limits per
// key, decided in the database on every backend. Limits and weights are written with SQL here
// (setLimit/setGroupWeight have tests of their own), so these tests test the claim alone.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimJobs, type ClaimResult } from "../src/run/claim.js";
import { completeRuns } from "../src/run/complete.js";
import { drain, enqueue, enqueueMany, getJob, JobError, reclaim, runWorker } from "../src/index.js";
import { backends, deferred, uniqueName, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("the fair claim ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const claim = (queue: string, start: number, limit = start): Promise<ClaimResult> =>
    claimJobs(t.db, { queues: [queue], limit, start, lease: 60, workerId: uniqueName("w") });

  async function limit(key: string, concurrency: number | null, rate?: { limit: number; perSeconds: number; burst?: number }): Promise<void> {
    await t.sql(`DELETE FROM ${t.db.limitsTable} WHERE limit_key = $1`, [key]);
    await t.sql(`INSERT INTO ${t.db.limitsTable} (limit_key, concurrency, rate_limit, rate_per_seconds, rate_burst) VALUES ($1, $2, $3, $4, $5)`, [
      key,
      concurrency,
      rate?.limit ?? null,
      rate?.perSeconds ?? null,
      rate?.burst ?? null,
    ]);
  }

  async function runningOf(key: string): Promise<number> {
    const [row] = await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM {jobs} WHERE status = 'running' AND concurrency_key = $1`, [key]);
    return Number(row!.n);
  }

  it("stores group (the tenant by default), concurrencyKey and maxSnoozes, and getJob reads them back", async () => {
    const a = await enqueue("t", null, { db: t.db, tenant: "org-1" });
    const b = await enqueue("t", null, { db: t.db, tenant: "org-1", group: "imports", concurrencyKey: "smtp:ses", maxSnoozes: 3 });
    const c = await enqueue("t", null, { db: t.db });
    expect(await getJob(a, { db: t.db })).toMatchObject({ group: "org-1", concurrencyKey: null, snoozes: 0, maxSnoozes: 100 });
    expect(await getJob(b, { db: t.db })).toMatchObject({ group: "imports", concurrencyKey: "smtp:ses", maxSnoozes: 3 });
    expect(await getJob(c, { db: t.db })).toMatchObject({ group: null, concurrencyKey: null });
    const [d] = await enqueueMany([{ task: "t", group: "g", concurrencyKey: "k" }], { db: t.db });
    expect(await getJob(d!, { db: t.db })).toMatchObject({ group: "g", concurrencyKey: "k" });
  });

  it("refuses a bad group, concurrency key or maxSnoozes, writing nothing", async () => {
    const queue = uniqueName("bad");
    for (const options of [{ group: 5 }, { concurrencyKey: "x".repeat(192) }, { maxSnoozes: -1 }, { maxSnoozes: 1.5 }, { tenant: "t".repeat(200) }]) {
      await expect(enqueue("t", null, { db: t.db, queue, ...(options as object) })).rejects.toBeInstanceOf(JobError);
    }
    expect(await t.sql(`SELECT id FROM {all} WHERE queue = $1`, [queue])).toEqual([]);
  });

  it("a group with one ready job is served at the next claim, whatever another group's backlog", async () => {
    const queue = uniqueName("fair");
    await enqueueMany(
      Array.from({ length: 200 }, () => ({ task: "t", tenant: "big" })),
      { db: t.db, queue },
    );
    const small = await enqueue("t", null, { db: t.db, queue, tenant: "small" });
    const first = await claim(queue, 1);
    expect(first.fair).toBe(true);
    expect(first.jobs.map((j) => j.tenant)).toEqual(["big"]);
    // "big" now runs one job, "small" none: the next claim serves "small".
    expect((await claim(queue, 1)).jobs.map((j) => j.id)).toEqual([small]);
  });

  it("a claim of several slots alternates between groups (weighted by setGroupWeight's table), priorities first", async () => {
    const queue = uniqueName("rr");
    await enqueueMany(
      Array.from({ length: 10 }, () => ({ task: "t", group: "a" })),
      { db: t.db, queue },
    );
    await enqueueMany(
      Array.from({ length: 10 }, () => ({ task: "t", group: "b" })),
      { db: t.db, queue },
    );
    const urgent = await enqueue("t", null, { db: t.db, queue, group: "b", priority: 10 });
    const jobs = (await claim(queue, 5)).jobs;
    expect(jobs[0]!.id).toBe(urgent);
    const groups = await Promise.all(jobs.map(async (j) => (await getJob(j.id, { db: t.db }))!.group));
    expect(groups.filter((g) => g === "a").length).toBe(3);
    expect(groups.filter((g) => g === "b").length).toBe(2);

    const weighted = uniqueName("weights");
    await t.sql(`INSERT INTO ${t.db.groupsTable} (group_key, weight) VALUES ($1, 3)`, [`${weighted}-heavy`]);
    await enqueueMany(
      Array.from({ length: 10 }, () => ({ task: "t", group: `${weighted}-heavy` })),
      { db: t.db, queue: weighted },
    );
    await enqueueMany(
      Array.from({ length: 10 }, () => ({ task: "t", group: `${weighted}-light` })),
      { db: t.db, queue: weighted },
    );
    const taken = (await claim(weighted, 8)).jobs;
    const heavy = (await Promise.all(taken.map(async (j) => (await getJob(j.id, { db: t.db }))!.group))).filter((g) => g === `${weighted}-heavy`);
    expect(heavy.length).toBe(6);
  });

  it("one job at a time, groups still take turns: drain serves the group it served longest ago", async () => {
    const queue = uniqueName("turns");
    await enqueueMany(
      Array.from({ length: 4 }, () => ({ task: "t", tenant: "a" })),
      { db: t.db, queue },
    );
    await enqueueMany(
      Array.from({ length: 2 }, () => ({ task: "t", tenant: "b" })),
      { db: t.db, queue },
    );
    const order: (string | null)[] = [];
    await drain({ t: async (_p, ctx) => void order.push((await getJob(ctx.job.id, { db: t.db }))!.group) }, { db: t.db, queue });
    expect(order).toEqual(["a", "b", "a", "b", "a", "a"]);
  });

  it("over groups alone a claim holds jobs beyond its free slots unstarted, counted as running for their group; with a limited key among the candidates, only what starts now", async () => {
    const queue = uniqueName("held");
    await enqueueMany(
      Array.from({ length: 10 }, (_, i) => ({ task: "t", group: i % 2 === 0 ? "a" : "b", payload: i })),
      { db: t.db, queue },
    );
    const taken = await claim(queue, 2, 6);
    expect(taken).toMatchObject({ fair: true, limited: false });
    expect(taken.jobs.map((j) => j.started)).toEqual([true, true, false, false, false, false]);
    expect(taken.jobs.map((j) => j.group)).toEqual(["a", "b", "a", "b", "a", "b"]);
    // Held jobs are running rows (their group's share counts them) whose attempt is not used yet.
    const rows = await t.sql<{ attempts: number | string; started: number | string | boolean }>(
      `SELECT attempts, CASE WHEN started_at IS NULL THEN 0 ELSE 1 END AS started FROM {jobs} WHERE queue = $1 AND status = 'running' ORDER BY id`,
      [queue],
    );
    expect(rows.map((r) => [Number(r.attempts), Number(r.started)])).toEqual([
      [1, 1],
      [1, 1],
      [0, 0],
      [0, 0],
      [0, 0],
      [0, 0],
    ]);

    // A limited key's job is held only while its key keeps a free slot besides: the key's last
    // slot never waits in one worker's buffer while another worker could run it.
    const limitedQueue = uniqueName("held-limited");
    const key = uniqueName("k");
    await limit(key, 2);
    await enqueueMany(
      Array.from({ length: 5 }, () => ({ task: "t", group: "a", concurrencyKey: key })),
      { db: t.db, queue: limitedQueue },
    );
    await enqueueMany(
      Array.from({ length: 5 }, () => ({ task: "t", group: "b" })),
      { db: t.db, queue: limitedQueue },
    );
    const held = await claim(limitedQueue, 1, 6);
    expect(held).toMatchObject({ fair: true, limited: true });
    expect(held.jobs.map((j) => [j.group, j.started])).toEqual([
      ["a", true],
      ["b", false],
      ["b", false],
      ["b", false],
      ["b", false],
      ["b", false],
    ]);
    expect(await runningOf(key)).toBe(1);

    // With slots to spare, the key's jobs are held too, each leaving one free; never past the limit.
    const roomy = uniqueName("held-roomy");
    const wide = uniqueName("k");
    await limit(wide, 3);
    await enqueueMany(
      Array.from({ length: 6 }, () => ({ task: "t", group: "a", concurrencyKey: wide })),
      { db: t.db, queue: roomy },
    );
    const some = await claim(roomy, 1, 6);
    expect(some.jobs.map((j) => j.started)).toEqual([true, false]);
    expect(await runningOf(wide)).toBe(2);
  });

  it("jobs without group or key form one group beside the others", async () => {
    const queue = uniqueName("mixed");
    await enqueueMany(
      Array.from({ length: 20 }, () => ({ task: "t", group: "g" })),
      { db: t.db, queue },
    );
    const plain = await enqueue("t", null, { db: t.db, queue });
    const jobs = (await claim(queue, 2)).jobs;
    expect(jobs.map((j) => j.id)).toContain(plain);
  });

  it("never lets more jobs of a key hold a lease than its limit; other keys are not held back", async () => {
    const queue = uniqueName("limit");
    const key = uniqueName("smtp");
    await limit(key, 2);
    await enqueueMany(
      Array.from({ length: 6 }, () => ({ task: "t", concurrencyKey: key })),
      { db: t.db, queue },
    );
    const other = await enqueue("t", null, { db: t.db, queue, concurrencyKey: uniqueName("free") });
    const first = await claim(queue, 10);
    expect(first.jobs.length).toBe(3);
    expect(first.jobs.map((j) => j.id)).toContain(other);
    expect(await runningOf(key)).toBe(2);
    expect(first.throttled).toEqual([key]);
    const blocked = await claim(queue, 10);
    expect(blocked.jobs).toEqual([]);
    expect(blocked.throttled).toEqual([key]);
    // A slot comes back with the run that held it, and only then.
    const mine = first.jobs.find((j) => j.id !== other)!;
    await completeRuns(t.db, [{ id: mine.id, token: mine.token, result: null }]);
    expect((await claim(queue, 10)).jobs.length).toBe(1);
    expect(await runningOf(key)).toBe(2);
  });

  it("a pattern gives each matching key its own limit; an exact key wins, then the longest pattern", async () => {
    const queue = uniqueName("patterns");
    const org = uniqueName("org");
    await limit(`${org}:*`, 1);
    await limit(`${org}:big*`, 3);
    await limit(`${org}:bigger`, 2);
    const keys = [`${org}:1`, `${org}:2`, `${org}:big1`, `${org}:bigger`];
    for (const key of keys)
      await enqueueMany(
        Array.from({ length: 5 }, () => ({ task: "t", concurrencyKey: key })),
        { db: t.db, queue },
      );
    await claim(queue, 50);
    expect(await Promise.all(keys.map(runningOf))).toEqual([1, 1, 3, 2]);
  });

  it("lowering a limit pre-empts nothing: no new claim of the key until it is under the new limit", async () => {
    const queue = uniqueName("lower");
    const key = uniqueName("k");
    await limit(key, 3);
    await enqueueMany(
      Array.from({ length: 6 }, () => ({ task: "t", concurrencyKey: key })),
      { db: t.db, queue },
    );
    const held = (await claim(queue, 10)).jobs;
    expect(held.length).toBe(3);
    await limit(key, 1);
    expect(await runningOf(key)).toBe(3);
    await completeRuns(t.db, [{ id: held[0]!.id, token: held[0]!.token, result: null }]);
    expect((await claim(queue, 10)).jobs).toEqual([]);
    await completeRuns(
      t.db,
      held.slice(1).map((j) => ({ id: j.id, token: j.token, result: null })),
    );
    expect((await claim(queue, 10)).jobs.length).toBe(1);
  });

  it("a slot held by a lost worker comes back with its lease (reclaim), never before", async () => {
    const queue = uniqueName("lost");
    const key = uniqueName("k");
    await limit(key, 1);
    await enqueueMany(
      Array.from({ length: 2 }, () => ({ task: "t", concurrencyKey: key, maxAttempts: 3 })),
      { db: t.db, queue },
    );
    expect((await claimJobs(t.db, { queues: [queue], limit: 1, start: 1, lease: 0.2, workerId: "dies" })).jobs.length).toBe(1);
    expect((await claim(queue, 1)).jobs).toEqual([]);
    await waitFor("the lease to run out", async () => (await reclaim({ db: t.db, queue, lease: 0.1 })).length > 0);
    expect((await claim(queue, 1)).jobs.length).toBe(1);
    expect(await runningOf(key)).toBe(1);
  });

  it("a rate limit takes tokens from a bucket the database refills; a held-back job says when to try again", async () => {
    const queue = uniqueName("rate");
    const key = uniqueName("api");
    await limit(key, null, { limit: 2, perSeconds: 60, burst: 2 });
    await enqueueMany(
      Array.from({ length: 5 }, () => ({ task: "t", concurrencyKey: key })),
      { db: t.db, queue },
    );
    const first = await claim(queue, 10);
    expect(first.jobs.length).toBe(2);
    const second = await claim(queue, 10);
    expect(second.jobs).toEqual([]);
    expect(second.throttled).toEqual([key]);
    // One token per 30 s, taken up to half a token early: the next start is 15 s away, not a poll interval.
    expect(second.retryInMs).toBeGreaterThan(10_000);
    expect(second.retryInMs).toBeLessThanOrEqual(15_000);
    const [job] = await t.sql<{ attempts: number | string }>(`SELECT attempts FROM {jobs} WHERE queue = $1 AND status = 'pending' ORDER BY id LIMIT 1`, [
      queue,
    ]);
    expect(Number(job!.attempts)).toBe(0);
  });

  it("a claim meeting 600 limited keys for the first time creates their rows (in several statements) and takes one job of each", async () => {
    const queue = uniqueName("many-keys");
    const prefix = uniqueName("mk");
    await limit(`${prefix}:*`, 1);
    await enqueueMany(
      Array.from({ length: 1200 }, (_, i) => ({ task: "t", concurrencyKey: `${prefix}:${i % 600}` })),
      { db: t.db, queue },
    );
    const taken = await claim(queue, 700);
    expect(taken.jobs).toHaveLength(600);
    expect(new Set(taken.jobs.map((j) => j.id)).size).toBe(600);
    const [rows] = await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM ${t.db.keysTable} WHERE concurrency_key LIKE $1`, [`${prefix}:%`]);
    expect(Number(rows!.n)).toBe(600);
  });

  it("a worker's buffer holds one job per slot over groups; jobs with keys and no group keep the prefetch, their limits still held", async () => {
    const CONCURRENCY = 2;
    const PREFETCH = 10;
    /** Runs a worker whose first `quick` jobs end at once and whose later ones wait: its buffer then fills to what it holds in the steady state. */
    async function steadyHold(queue: string, quick: number, held: () => Promise<void>): Promise<void> {
      let calls = 0;
      const release = deferred();
      const stop = new AbortController();
      const worker = runWorker(
        { t: async () => void (++calls > quick && (await release.promise)) },
        { db: t.db, queue, concurrency: CONCURRENCY, prefetch: PREFETCH, pollInterval: 0.05, sweepInterval: 0, schedules: false, signal: stop.signal },
      );
      try {
        await waitFor(`${queue}: ${CONCURRENCY} handlers waiting`, async () => calls >= quick + CONCURRENCY);
        await held();
      } finally {
        release.resolve();
        stop.abort();
        await worker;
      }
    }
    const running = async (queue: string) =>
      (
        await t.sql<{ k: string; n: number | string }>(
          `SELECT concurrency_key AS k, count(*) AS n FROM {jobs} WHERE queue = $1 AND status = 'running' GROUP BY concurrency_key`,
          [queue],
        )
      ).map((r) => [r.k, Number(r.n)] as const);
    const total = (rows: (readonly [string, number])[]) => rows.reduce((sum, [, n]) => sum + n, 0);

    // Groups: a group that becomes ready waits behind the whole buffer, so it stays one job per slot.
    const grouped = uniqueName("buffer-groups");
    await enqueueMany(
      Array.from({ length: 60 }, (_, i) => ({ task: "t", group: i % 2 === 0 ? "a" : "b" })),
      { db: t.db, queue: grouped },
    );
    await steadyHold(grouped, 20, async () => {
      // A bounded observation window, time-based on purpose: it proves an absence (the buffer
      // does not grow past one job per slot), and a claim that does not happen sends no signal.
      await new Promise((r) => setTimeout(r, 300));
      // At most one held per slot (fewer while a claim is still under way on a busy machine).
      expect(total(await running(grouped))).toBeLessThanOrEqual(2 * CONCURRENCY);
    });

    // Keys without a group: the plain prefetch, and still no key past its limit.
    const keyed = uniqueName("buffer-keys");
    const prefix = uniqueName("bk");
    await limit(`${prefix}:*`, 2);
    await enqueueMany(
      Array.from({ length: 60 }, (_, i) => ({ task: "t", concurrencyKey: `${prefix}:${i % 20}` })),
      { db: t.db, queue: keyed },
    );
    await steadyHold(keyed, 20, async () => {
      // Claims come in batches (half the room free), so the buffer holds between half and all of it.
      await waitFor("more jobs held than two per slot", async () => total(await running(keyed)) > 2 * CONCURRENCY);
      expect(total(await running(keyed))).toBeLessThanOrEqual(CONCURRENCY + PREFETCH);
      expect(Math.max(...(await running(keyed)).map(([, n]) => n))).toBeLessThanOrEqual(2);
    });
  });

  // A claim that waits (here on a key row another transaction holds) must not idle the slots
  // that free meanwhile: the buffered jobs are there to cover the claim. SQLite has one writer
  // and a synchronous driver: a waiting claim blocks the whole process, there is nothing to overlap.
  it.skipIf(backend.name === "sqlite")("buffered jobs start in slots freed while a claim waits", async () => {
    const queue = uniqueName("claim-waits");
    const key = uniqueName("kw");
    await limit(key, 100);
    await enqueueMany(
      Array.from({ length: 12 }, () => ({ task: "t", concurrencyKey: key })),
      { db: t.db, queue },
    );
    const gates: ReturnType<typeof deferred<void>>[] = [];
    const stop = new AbortController();
    const worker = runWorker(
      {
        t: async () => {
          const gate = deferred();
          gates.push(gate);
          await gate.promise;
        },
      },
      { db: t.db, queue, concurrency: 1, prefetch: 5, pollInterval: 0.05, sweepInterval: 0, schedules: false, signal: stop.signal },
    );
    const called = (n: number) => waitFor(`${n} handlers called`, async () => gates.length >= n);
    /**
     * Other sessions whose statement waits on the key row that session `holder` holds. PostgreSQL
     * names the blocker. MariaDB does not always list this wait in innodb_lock_waits (seen while the
     * read of the row ran in the optimiser's "Statistics" state), so there: another session's
     * locking read of the keys table in flight, which cannot finish while the row is held.
     */
    const waitingOn = async (holder: number) => {
      const [row] =
        backend.name === "postgres"
          ? await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", [holder])
          : await t.sql<{ n: number | string }>(
              `SELECT count(*) AS n FROM information_schema.processlist
               WHERE db = DATABASE() AND id <> $1 AND command = 'Query' AND info LIKE $2 AND info LIKE '%FOR UPDATE%'`,
              [holder, `%${t.db.keysTable}%`],
            );
      return Number(row!.n);
    };
    const release = deferred();
    let holding: Promise<void> | undefined;
    try {
      await called(1);
      // The key's row exists now (the first claim made it): hold it, so the next claim waits.
      const held = deferred<number>();
      holding = t.withTransaction(async (bound) => {
        await bound.executor.query(`SELECT tokens FROM ${t.db.keysTable} WHERE concurrency_key = $1 FOR UPDATE`, [key]);
        const session = backend.name === "postgres" ? "SELECT pg_backend_pid() AS id" : "SELECT CONNECTION_ID() AS id";
        held.resolve(Number((await bound.executor.query<{ id: number | string }>(session)).rows[0]!.id));
        await release.promise;
      }, "commit");
      const holder = await held.promise;
      // Three ends free half of the worker's room (1 slot + 5 held): it claims, and waits on the row.
      for (let n = 1; n <= 3; n++) {
        gates[n - 1]!.resolve();
        await called(n + 1);
      }
      await waitFor("the worker's claim to wait on the held key row", async () => (await waitingOn(holder)) > 0);
      gates[3]!.resolve();
      await called(5);
      gates[4]!.resolve();
      await called(6);
    } finally {
      release.resolve();
      await holding;
      for (const gate of gates) gate.resolve();
      stop.abort();
      await worker;
    }
  });

  it("a worker keeps a key under its limit and runs every job", async () => {
    const queue = uniqueName("worker");
    const key = uniqueName("k");
    await limit(key, 2);
    await enqueueMany(
      Array.from({ length: 12 }, (_, i) => ({ task: "t", concurrencyKey: key, payload: i })),
      { db: t.db, queue },
    );
    const throttled: string[][] = [];
    let now = 0;
    let most = 0;
    let done = 0;
    const finished = deferred();
    const stop = new AbortController();
    const worker = runWorker(
      {
        t: async () => {
          most = Math.max(most, ++now);
          await new Promise((r) => setTimeout(r, 20));
          now--;
          if (++done === 12) finished.resolve();
        },
      },
      // No polling to fall back on: each freed slot of the key must itself bring the next claim.
      { db: t.db, queue, concurrency: 6, pollInterval: 60, signal: stop.signal, events: { "worker:throttled": (e) => throttled.push(e.keys) } },
    );
    await finished.promise;
    stop.abort();
    await worker;
    expect(most).toBe(2);
    expect(throttled.length).toBeGreaterThan(0);
    expect(throttled.every((keys) => keys.length === 1 && keys[0] === key)).toBe(true);
  });
});
