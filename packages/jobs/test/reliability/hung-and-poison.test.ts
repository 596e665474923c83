// Two process faults beyond a clean crash. A frozen worker (SIGSTOP: a hang of the whole
// process, as under a stuck GC, a debugger or a suspended VM) loses its jobs once its lease
// runs out, and when it thaws, everything it still tries to write is refused. A poison job
// that kills its worker on every attempt ends failed after maxAttempts ("worker lost") instead
// of taking workers down forever, and the other jobs are all done.
import Database from "better-sqlite3";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { isBusy } from "../../src/db/sqlite-busy.js";
import { enqueue, enqueueMany, getJob, WORKER_LOST_PREFIX } from "../../src/index.js";
import { allJobs, backends, waitFor, type TestDatabase } from "../helpers/backends.js";
import { effectTables } from "./helpers/effects.js";
import type { Child } from "./helpers/children.js";
import { Fleet } from "./helpers/fleet.js";
import { enqueued, finalJobs, historyOf } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { expectSettled, finished } from "./helpers/queue.js";

const LEASE = 1.5;
const SWEEP = 0.5;

/** Whether a writer can take the SQLite file's write lock within a second. */
function writable(file: string): boolean {
  const db = new Database(file, { timeout: 1000 });
  try {
    db.exec("BEGIN IMMEDIATE");
    db.exec("ROLLBACK");
    return true;
  } catch (error) {
    if (isBusy(error)) return false;
    throw error;
  } finally {
    db.close();
  }
}

describe.each(backends())("hung workers and poison jobs ($name)", (backend) => {
  let t: TestDatabase;
  const fleets: Fleet[] = [];
  let effects: string;
  let first: string;

  beforeAll(async () => {
    t = await backend.create();
    ({ effects, first } = await effectTables(t));
  });
  afterAll(async () => {
    for (const fleet of fleets) await fleet.kill();
    await t.close();
  });

  const fleetOf = (queue: string, size: number, supervise: boolean, lease = LEASE) => {
    const fleet = new Fleet(
      {
        url: t.url,
        schema: t.schema,
        queue,
        concurrency: 3,
        lease,
        sweepInterval: SWEEP,
        pollInterval: 0.1,
        poolSize: 4,
        tables: { effects, first },
        history: true,
      },
      size,
      { prefix: `${queue}-`, supervise },
    );
    fleets.push(fleet);
    return fleet;
  };

  /**
   * The history of every run in `queue` (RELIABILITY.md, "The history checker"), judged against
   * its rows. Read once every worker stopped: a verdict can be in the table before its line is printed.
   */
  const expectHistoryKept = async (queue: string, fleet: Fleet, ids: number[]) => {
    const history = [...ids.map((id) => enqueued(id, "test")), ...historyOf(fleet.all)];
    const violations = checkHistory(history, await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db), queue));
    expect(violations, describeViolations(violations)).toEqual([]);
  };

  /**
   * A process frozen inside an SQLite write transaction keeps the file's one write lock until it
   * thaws: SQLite locks the file and a lock has no lease, so nobody can write meanwhile (the
   * limit RELIABILITY.md states). The fault under test is a hang the others can work around, so
   * on SQLite the freeze is kept only at an instant the worker holds no write lock: a writer of
   * our own must get the lock within a second (the other worker's transactions last
   * milliseconds), else the worker is thawed and frozen again a moment later.
   */
  const freeze = async (proc: Child) => {
    for (let attempt = 1; ; attempt++) {
      proc.kill("SIGSTOP");
      if (backend.name !== "sqlite" || writable(t.url.slice("sqlite:".length))) return;
      proc.kill("SIGCONT");
      if (attempt === 50) throw new Error("the worker held SQLite's write lock at each of 50 freezes");
      await sleep(10 + attempt);
    }
  };

  it("a frozen worker (SIGSTOP past its lease) loses its jobs to the others; thawed, its late writes are refused", async () => {
    const queue = "frozen";
    const fleet = fleetOf(queue, 2, false);
    await fleet.started();
    const [frozen, other] = fleet.slots as [NonNullable<(typeof fleet.slots)[0]>, NonNullable<(typeof fleet.slots)[0]>];
    const ids = await enqueueMany(
      Array.from({ length: 12 }, () => ({ task: "effect", payload: { ms: 500 }, maxAttempts: 5 })),
      { db: t.db, queue },
    );
    // Jobs it holds whose handler it has started (the rest wait prefetched in its buffer).
    const runningHere = async () =>
      (
        await t.sql<{ id: number | string }>(
          `SELECT j.id FROM {jobs} j JOIN ${effects} e ON e.job_id = j.id AND e.worker = $1 WHERE j.status = 'running' AND j.locked_by = $1`,
          [frozen.label],
        )
      ).map((r) => Number(r.id));
    await waitFor("the first worker running handlers", async () => (await runningHere()).length > 0);
    await freeze(frozen);
    // Thawed whatever happens, so that a failure here does not lock the file for the next test.
    onTestFinished(() => void frozen.kill("SIGCONT"));
    const started = await runningHere();
    const heldRows = await t.sql<{ id: number | string; started: unknown }>(
      `SELECT id, started_at IS NOT NULL AS started FROM {jobs} WHERE status = 'running' AND locked_by = $1`,
      [frozen.label],
    );
    const held = heldRows.filter((r) => Boolean(Number(r.started))).map((r) => Number(r.id));
    // Held in its buffer, never started: no attempt was used, so they come back unused.
    const buffered = heldRows.filter((r) => !Number(r.started)).map((r) => Number(r.id));
    expect(started.length).toBeGreaterThan(0);
    // Past its lease the others take its jobs and finish everything, while it sleeps.
    await waitFor("every job done by the other worker", async () => (await finished(t, queue)) === ids.length, 30_000, 100);
    frozen.kill("SIGCONT");
    // Thawed, its handlers return and its lease timer fires: its writes about every job it
    // was running are refused (the prefetched ones it drops from its buffer).
    await frozen.waitForMessage(
      "its writes about every started job refused",
      () => started.every((id) => frozen.messages.some((m) => m.type === "job:fenced" && m.job === id)),
      15_000,
    );
    for (const id of held) {
      const job = await getJob(id, { db: t.db });
      expect(job).toMatchObject({ status: "done", attempts: 2, result: { attempt: 2, worker: other.label } });
      expect(job!.lastError).toMatch(new RegExp(`^${WORKER_LOST_PREFIX}: attempt 1 of 5 held by ${frozen.label.replace(".", "\\.")} `));
    }
    for (const id of buffered) {
      const job = await getJob(id, { db: t.db });
      expect(job).toMatchObject({ status: "done", attempts: 1, lastError: null, result: { attempt: 1, worker: other.label } });
    }
    await expectSettled(t.db, queue, ids.length);
    expect((await fleet.stop()).map((e) => e.code)).toEqual([0, 0]);
    // The thawed worker's late writes are in it, refused; its runs were handed over by reclaims.
    expect(historyOf([frozen]).some((e) => "accepted" in e && !e.accepted)).toBe(true);
    await expectHistoryKept(queue, fleet, ids);
  }, 60_000);

  it("a poison job that kills its worker on every attempt ends failed after maxAttempts, and the other jobs are done", async () => {
    const queue = "poison";
    const fleet = fleetOf(queue, 2, true, 1); // a supervisor restarts whatever dies; a short lease
    await fleet.started();
    const poison = await enqueue("poison", null, { db: t.db, queue, maxAttempts: 3, priority: 10 });
    const others = await enqueueMany(
      Array.from({ length: 40 }, () => ({ task: "effect", payload: { ms: 30 }, maxAttempts: 10 })),
      { db: t.db, queue },
    );
    await waitFor("the poison job to fail and the rest to be done", async () => (await finished(t, queue)) === others.length + 1, 60_000, 100);
    const job = await getJob(poison, { db: t.db });
    expect(job).toMatchObject({ status: "failed", attempts: 3 });
    expect(job!.lastError).toMatch(new RegExp(`^${WORKER_LOST_PREFIX}: attempt 3 of 3 held by ${queue}-`));
    expect(fleet.deaths).toBe(3); // one worker per attempt, then never again
    for (const id of others) expect((await getJob(id, { db: t.db }))!.status).toBe("done");
    await expectSettled(t.db, queue, others.length + 1);
    expect((await fleet.stop()).every((e) => e.code === 0)).toBe(true);
    // Each poisoned process recorded its own death; the poison job's end is its last reclaim's verdict.
    const history = historyOf(fleet.all);
    expect(history.filter((e) => e.kind === "died")).toHaveLength(3);
    const reclaims = history.flatMap((e) => (e.kind === "reclaimed" && e.job === poison ? [e] : [])).sort((a, b) => a.at - b.at);
    expect(reclaims.map((e) => e.status)).toEqual(["pending", "pending", "failed"]);
    await expectHistoryKept(queue, fleet, [poison, ...others]);
  }, 90_000);
});
