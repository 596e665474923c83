// Point 5 of the flow-control issue, with real processes: a key's slots are its running jobs,
// so a worker SIGKILLed while it holds some gives them back with its leases (no leak), a run
// that lost its job and completes late frees nothing of its successor's (no double release),
// and a rate limit holds across worker processes without using attempts while jobs wait.
// The in-process property test (flow-property.test.ts) covers the same rules by simulation;
// here the holders are child processes that really die, stall and race.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimJobs, type ClaimedJob } from "../../src/run/claim.js";
import { completeRuns } from "../../src/run/complete.js";
import { createWorker, enqueueMany, getJob, reclaim, setLimit, type Job } from "../../src/index.js";
import { allJobs, backends, uniqueName, waitFor, type TestDatabase } from "../helpers/backends.js";
import type { WorkerConfig } from "./fixtures/worker.js";
import { Child, fixture, killAll, type Message } from "./helpers/children.js";
import { effectTables } from "./helpers/effects.js";
import { claimedBy, completedBy, died, enqueued, finalJobs, historyOf, historyRecorder, reclaimedBy, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { count, sleep } from "./helpers/queue.js";

const LIMIT = 2;

describe.each(backends())("flow control with killed and stalled worker processes ($name)", (backend) => {
  let t: TestDatabase;
  let tables: { effects: string; first: string };
  const children: Child[] = [];

  beforeAll(async () => {
    t = await backend.create();
    tables = await effectTables(t);
  });
  afterAll(async () => {
    await killAll(children);
    await t.close();
  });

  /** A worker process running the fixture's `effect` handler (it records each run, then sleeps `payload.ms`). */
  async function spawnWorker(workerId: string, queue: string, overrides: Partial<WorkerConfig>): Promise<Child> {
    const config: WorkerConfig = {
      url: t.url,
      schema: t.schema,
      workerId,
      queue,
      concurrency: 5,
      lease: 30,
      sweepInterval: 0,
      pollInterval: 0.05,
      tables,
      history: true,
      ...overrides,
    };
    const child = new Child(workerId, [fixture("worker.ts"), JSON.stringify(config)]);
    children.push(child);
    await child.waitForMessage("started", (m) => m.type === "worker:started", 30_000);
    return child;
  }

  const runningOf = (key: string) => count(t, `SELECT count(*) AS n FROM {jobs} WHERE concurrency_key = $1 AND status = 'running'`, [key]);

  /** Samples the key's running count from the database until stopped; `max` is the highest seen. */
  function sampleRunning(key: string): { stop(): Promise<number> } {
    let stopped = false;
    let max = 0;
    const loop = (async () => {
      while (!stopped) {
        max = Math.max(max, await runningOf(key));
        await sleep(5);
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        await loop;
        return max;
      },
    };
  }

  /** The runs the fixture recorded for jobs `ids` (one enqueueMany: nothing else is enqueued meanwhile, so no other job's id falls between). */
  const runsOf = (ids: number[]) =>
    t.sql<{ job_id: number | string; attempt: number | string; worker: string }>(
      `SELECT job_id, attempt, worker FROM ${tables.effects} WHERE job_id BETWEEN $1 AND $2 ORDER BY job_id`,
      [Math.min(...ids), Math.max(...ids)],
    );

  const jobs = async (ids: number[]): Promise<Job[]> => Promise.all(ids.map(async (id) => (await getJob(id, { db: t.db })) as Job));

  /**
   * The history of every run in `queue` (RELIABILITY.md, "The history checker"): the test's own,
   * then the worker processes' (read once they stopped or died), judged against its rows.
   */
  async function expectHistoryKept(queue: string, history: HistoryEvent[], processes: Child[]): Promise<void> {
    const violations = checkHistory([...history, ...historyOf(processes)], await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db), queue));
    expect(violations, describeViolations(violations)).toEqual([]);
  }

  it("a SIGKILLed worker's slots come back with its leases, never sooner: the key stays at its limit and every job ends", async () => {
    const queue = uniqueName("slots");
    const key = `${queue}:smtp`;
    await setLimit(key, { concurrency: LIMIT }, { db: t.db });
    // The child's handlers outlive it; the in-process worker's handler below is short.
    const ids = await enqueueMany(
      Array.from({ length: 10 }, () => ({ task: "effect", payload: { ms: 600_000 }, concurrencyKey: key, maxAttempts: 3 })),
      { db: t.db, queue },
    );
    const history: HistoryEvent[] = ids.map((id) => enqueued(id, "test"));
    const doomed = await spawnWorker("doomed", queue, { concurrency: 5, lease: 2 });
    await waitFor("the doomed worker runs two jobs of the key", async () => {
      doomed.assertRunning();
      return (await runsOf(ids)).length === LIMIT && (await runningOf(key)) === LIMIT;
    });
    const sampler = sampleRunning(key);

    // The survivor competes for the key from now on, the dead worker's runs still counted.
    let live = 0;
    let maxLive = 0;
    const seenInHandlers: number[] = [];
    const stop = new AbortController();
    const recorder = historyRecorder("survivor", (event) => history.push(event));
    const survivor = createWorker(
      recorder.wrap({
        effect: async () => {
          maxLive = Math.max(maxLive, ++live);
          try {
            seenInHandlers.push(await runningOf(key));
            await sleep(100);
            return null;
          } finally {
            live--;
          }
        },
      }),
      {
        db: t.db,
        queue,
        concurrency: 5,
        lease: 30,
        sweepInterval: 0.1,
        pollInterval: 0.05,
        workerId: "survivor",
        signal: stop.signal,
        events: recorder.events,
      },
    );
    const errors: unknown[] = [];
    survivor.on("worker:error", (e) => errors.push(e.error));
    const reclaimed: number[] = [];
    survivor.on("job:reclaimed", (e) => reclaimed.push(e.job.id));
    const running = survivor.run();

    let leasesEnd: number;
    let deadIds: number[];
    let maxSampled: number;
    try {
      history.push(died(doomed.label));
      doomed.kill("SIGKILL");
      await doomed.exited;
      deadIds = (await runsOf(ids)).map((r) => Number(r.job_id));
      const dead = await jobs(deadIds);
      for (const job of dead) expect(job.status, `job ${job.id} of the dead worker before its lease ended`).toBe("running");
      leasesEnd = Math.min(...dead.map((j) => (j.status === "running" ? j.lockedUntil.getTime() : Infinity)));

      await waitFor(
        "all ten jobs done",
        async () => (await count(t, `SELECT count(*) AS n FROM {all} WHERE queue = $1 AND status = 'done'`, [queue])) === ids.length,
        30_000,
      );
    } finally {
      // Stopped on failure too: neither may outlive the test's database.
      maxSampled = await sampler.stop();
      stop.abort();
      await running;
    }

    expect(errors).toEqual([]);
    expect(maxSampled, "running jobs of the key, sampled from the database").toBeLessThanOrEqual(LIMIT);
    expect(Math.max(...seenInHandlers), "running jobs of the key, as each handler saw them").toBeLessThanOrEqual(LIMIT);
    // Both slots came back (none leaked) and were used at once, never a third.
    expect(maxLive).toBe(LIMIT);
    expect(reclaimed.sort((a, b) => a - b)).toEqual(deadIds);
    const final = await jobs(ids);
    // The dead worker's leases had to end before any job of the key started again.
    for (const job of final) expect(job.startedAt!.getTime(), `job ${job.id} started again before the dead leases ended`).toBeGreaterThanOrEqual(leasesEnd);
    // The killed runs used their attempt: they had started.
    expect(final.map((j) => ({ id: j.id, status: j.status, attempts: j.attempts }))).toEqual(
      ids.map((id) => ({ id, status: "done", attempts: deadIds.includes(id) ? 2 : 1 })),
    );
    await expectHistoryKept(queue, history, [doomed]);
  }, 60_000);

  /**
   * Two runs of the key in worker process A lose their jobs (`how`), another holder takes them
   * (the key full again), then A's handlers return: their completions must be refused and free
   * nothing, so a further claim still finds the key full.
   */
  async function lateCompletion(how: "forced takeover" | "lease expired while stalled"): Promise<void> {
    const queue = uniqueName("late");
    const key = `${queue}:api`;
    await setLimit(key, { concurrency: LIMIT }, { db: t.db });
    const stalled = how === "lease expired while stalled";
    const ids = await enqueueMany(
      Array.from({ length: 4 }, () => ({ task: "effect", payload: { ms: stalled ? 300 : 2500 }, concurrencyKey: key, maxAttempts: 3 })),
      { db: t.db, queue },
    );
    const history: HistoryEvent[] = ids.map((id) => enqueued(id, "test"));
    // Concurrency 2 and no prefetch: with both handlers busy, A claims nothing more of its own
    // (by default it would hold as many again in its buffer, racing the holder for the freed slots).
    const a = await spawnWorker(`late-${stalled ? "stalled" : "forced"}`, queue, { concurrency: LIMIT, prefetch: 0, lease: stalled ? 1 : 30 });
    await waitFor("A runs two jobs of the key", async () => {
      a.assertRunning();
      return (await runsOf(ids)).length === LIMIT;
    });
    let taken: number[];
    if (stalled) {
      // A stalls (a long pause, a frozen VM) past its leases; a sweep takes its jobs back.
      a.kill("SIGSTOP");
      const back: number[] = [];
      await waitFor("the sweep takes A's expired leases back", async () => {
        const swept = await reclaim({ db: t.db, queue });
        history.push(...reclaimedBy("test", swept));
        back.push(...swept.map((j) => j.id));
        return back.length === LIMIT;
      });
      taken = back;
    } else {
      const swept = await reclaim({ db: t.db, queue, lease: 0 });
      history.push(...reclaimedBy("test", swept));
      taken = swept.map((j) => j.id);
    }
    expect(taken.sort((x, y) => x - y)).toEqual(ids.slice(0, LIMIT));
    const holder = (await claimJobs(t.db, { queues: [queue], limit: 5, start: 5, lease: 60, workerId: "holder" })).jobs;
    history.push(...claimedBy("holder", holder));
    expect(holder.map((j) => j.id).sort((x, y) => x - y)).toEqual(ids.slice(0, LIMIT));
    if (stalled) a.kill("SIGCONT");

    const fencedCompletion = (m: Message) => m.type === "job:fenced" && m.write === "complete";
    // Settled either way: both refused, or one landed and ended a job the holder runs.
    await waitFor("A's late completions written", async () => {
      a.assertRunning();
      if (a.count(fencedCompletion) === LIMIT) return true;
      return (await jobs(ids.slice(0, LIMIT))).some((j) => j.status !== "running");
    });
    // The slots are still the holder's: nothing more is claimed, and its runs are the key's running jobs.
    const third = await claimJobs(t.db, { queues: [queue], limit: 5, start: 5, lease: 60, workerId: "third" });
    history.push(...claimedBy("third", third.jobs));
    expect(
      third.jobs.map((j) => j.id),
      "a third job of the key claimed",
    ).toEqual([]);
    const rows = await t.sql<{ id: number | string; token: string }>(
      `SELECT id, claim_token AS token FROM {jobs} WHERE concurrency_key = $1 AND status = 'running' ORDER BY id`,
      [key],
    );
    expect(rows.map((r) => ({ id: Number(r.id), token: String(r.token) }))).toEqual(
      holder.map((j) => ({ id: j.id, token: j.token })).sort((x, y) => x.id - y.id),
    );
    expect(a.messages.filter(fencedCompletion).map((m) => m.job)).toEqual(expect.arrayContaining(ids.slice(0, LIMIT)));
    expect(await count(t, `SELECT count(*) AS n FROM {jobs} WHERE queue = $1 AND status = 'pending'`, [queue])).toBe(2);
    history.push(died(a.label));
    a.kill("SIGKILL");
    await a.exited;

    // The holder's own completions free the slots: the two waiting jobs are claimable, no more.
    const finish = async (worker: string, runs: ClaimedJob[]) => {
      const sentAt = Date.now();
      const kept = await completeRuns(
        t.db,
        runs.map((j) => ({ id: j.id, token: j.token, result: null })),
      );
      history.push(...completedBy(worker, runs, kept, sentAt));
      return kept;
    };
    expect((await finish("holder", holder)).size).toBe(LIMIT);
    const next = (await claimJobs(t.db, { queues: [queue], limit: 5, start: 5, lease: 60, workerId: "next" })).jobs;
    history.push(...claimedBy("next", next));
    expect(next.map((j) => j.id).sort((x, y) => x - y)).toEqual(ids.slice(LIMIT));
    await finish("next", next);
    expect((await jobs(ids)).map((j) => ({ id: j.id, status: j.status, attempts: j.attempts }))).toEqual(
      ids.map((id, i) => ({ id, status: "done", attempts: i < LIMIT ? 2 : 1 })),
    );
    // A's late completions are in it, refused.
    expect(historyOf([a]).filter((e) => e.kind === "completed" && !e.accepted)).toHaveLength(LIMIT);
    await expectHistoryKept(queue, history, [a]);
  }

  it("a run taken over by force that completes late frees no slot of the run that took its place", () => lateCompletion("forced takeover"), 60_000);

  it("a stalled process whose leases expired completes late: refused, and the key stays full", () => lateCompletion("lease expired while stalled"), 60_000);

  it("a rate limit holds across three worker processes, and waiting uses no attempt", async () => {
    const queue = uniqueName("rate");
    const key = `${queue}:mail`;
    const rate = { limit: 5, perSeconds: 1, burst: 1 };
    await setLimit(key, { rate }, { db: t.db });
    // All three are up before the jobs exist, so they race for the tokens from the first one.
    const workers = await Promise.all(["r1", "r2", "r3"].map((id) => spawnWorker(id, queue, { concurrency: 3 })));
    const ids = await enqueueMany(
      Array.from({ length: 15 }, () => ({ task: "effect", payload: { ms: 20 }, concurrencyKey: key, maxAttempts: 1 })),
      { db: t.db, queue },
    );
    await waitFor(
      "all fifteen jobs done",
      async () => {
        for (const w of workers) w.assertRunning();
        return (await count(t, `SELECT count(*) AS n FROM {all} WHERE queue = $1 AND status = 'done'`, [queue])) === ids.length;
      },
      30_000,
    );
    await Promise.all(workers.map((w) => w.stop()));
    await expectHistoryKept(
      queue,
      ids.map((id) => enqueued(id, "test")),
      workers,
    );

    const final = await jobs(ids);
    // Held back by the rate, a job is not started: one attempt each, and it ran once.
    expect(final.map((j) => ({ id: j.id, status: j.status, attempts: j.attempts }))).toEqual(ids.map((id) => ({ id, status: "done", attempts: 1 })));
    const runs = await runsOf(ids);
    expect(runs.map((r) => `${String(r.job_id)}:${String(r.attempt)}`).sort()).toEqual(ids.map((id) => `${id}:1`).sort());
    expect(new Set(runs.map((r) => r.worker)).size, "processes that ran jobs").toBeGreaterThan(1);
    // Starts by the database clock (a fair claim starts what it takes): a bucket of burst 1
    // refilled at 5/s lets at most 1 + 5 start in any closed one-second window.
    const starts = final.map((j) => j.startedAt!.getTime()).sort((x, y) => x - y);
    const busiest = Math.max(...starts.map((s) => starts.filter((u) => u >= s && u <= s + 1000).length));
    expect(busiest, `starts in the busiest second (${starts.map((s) => s - starts[0]!).join(", ")} ms)`).toBeLessThanOrEqual(rate.burst + rate.limit);
  }, 60_000);
});
