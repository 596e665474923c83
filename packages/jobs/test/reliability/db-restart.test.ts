// Point 2 of the reliability issue: the database goes away under running workers. On a
// PostgreSQL server of its own, the test restarts the server mid-run (pg_ctl restart -m fast),
// cuts every connection with pg_terminate_backend (some in the middle of a checkpoint's
// transaction), and stops it long enough to try an enqueue. Workers must not crash, must come
// back by themselves (LISTEN included) and finish every job; the enqueue must fail fast and
// leave nothing behind.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, enqueue, enqueueMany, getJob, migrate, type JobsDatabase } from "../../src/index.js";
import { allJobs, waitFor } from "../helpers/backends.js";
import { Child, fixture, killAll, type Message } from "./helpers/children.js";
import { enqueued, finalJobs, historyOf, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { postgresBinDir, startPrivatePostgres, type PrivatePostgres } from "./helpers/private-postgres.js";
import { scaled, timeoutMs } from "./helpers/scale.js";
import type { WorkerConfig } from "./fixtures/worker.js";

const BIN = postgresBinDir();
const SCHEMA = "restart";
const QUEUE = "restart";
const BATCH = scaled(150, 1500);
/** Far longer than any wait below: a job picked up quickly was woken by LISTEN, not by a poll. */
const POLL_INTERVAL = 30;
const OUTAGE_ENQUEUE_BOUND_MS = 5000;

describe.skipIf(!BIN)("database restart and cut connections (a private PostgreSQL server)", () => {
  let server: PrivatePostgres;
  let db: JobsDatabase;
  const children: Child[] = [];

  /** One number from the server, or undefined while it is unreachable (probes retry). */
  async function scalar(text: string, params: unknown[] = []): Promise<number | undefined> {
    try {
      const { rows } = await db.executor.query<{ n: number | string }>(text, params);
      return Number(rows[0]?.n);
    } catch {
      return undefined;
    }
  }
  const done = () => scalar(`SELECT count(*) AS n FROM ${allJobs(db)} WHERE status = 'done'`);
  /** Every job done; fails at once (with its stderr) if a worker process died meanwhile. */
  const allDone = async (total: number) => {
    for (const child of children) child.assertRunning();
    return (await done()) === total;
  };

  beforeAll(async () => {
    server = await startPrivatePostgres(BIN!);
    db = connect(server.url, { schema: SCHEMA, poolSize: 5 });
    await migrate({ db });
    await db.executor.query(
      `CREATE TABLE "${SCHEMA}".steps (job_id bigint NOT NULL, attempt integer NOT NULL, step integer NOT NULL, PRIMARY KEY (job_id, attempt, step))`,
    );
  }, 120_000);
  afterAll(async () => {
    await killAll(children);
    await db?.close().catch(() => undefined);
    await server?.destroy();
  }, 60_000);

  function startWorker(workerId: string): Child {
    const config: WorkerConfig = {
      url: server.url,
      schema: SCHEMA,
      workerId,
      queue: QUEUE,
      concurrency: 4,
      lease: 3,
      sweepInterval: 0.5,
      pollInterval: POLL_INTERVAL,
      poolSize: 5,
      tables: { steps: `"${SCHEMA}".steps` },
      history: true,
    };
    const child = new Child(workerId, [fixture("worker.ts"), JSON.stringify(config)]);
    children.push(child);
    return child;
  }

  const errorsSince = (child: Child, since: number) => child.messages.filter((m: Message) => m.type === "worker:error" && (m.at as number) >= since);

  it(
    "workers ride out a restart and a cut of every connection, an enqueue during the outage fails fast, and LISTEN comes back",
    async () => {
      const workers = [startWorker("r1"), startWorker("r2")];
      await Promise.all(workers.map((w) => w.waitForMessage("started", (m) => m.type === "worker:started")));
      const steps = (n: number, holdMs?: number) =>
        Array.from({ length: n }, (_, i) => ({ task: "steps", payload: { steps: 3, ms: 10, ...(holdMs && i % 10 === 0 ? { holdMs } : {}) }, maxAttempts: 10 }));

      const history: HistoryEvent[] = [];
      const acknowledge = (ids: number[]) => history.push(...ids.map((id) => enqueued(id, "test")));

      // 1. pg_ctl restart -m fast in the middle of a run.
      acknowledge(await enqueueMany(steps(BATCH), { db, queue: QUEUE }));
      await waitFor("a third of the first batch done", async () => ((await done()) ?? 0) >= BATCH / 3, 60_000);
      const restartAt = Date.now();
      await server.restart("fast");
      await waitFor("the first batch done after the restart", () => allDone(BATCH), timeoutMs(60, 300), 100);
      for (const w of workers) expect(errorsSince(w, restartAt).length).toBeGreaterThan(0); // each saw it

      // 2. Every connection cut (pg_terminate_backend), some inside an open checkpoint transaction.
      acknowledge(await enqueueMany(steps(BATCH, 400), { db, queue: QUEUE }));
      await waitFor("a checkpoint transaction open on the server", () =>
        scalar(`SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'idle in transaction' AND datname = current_database()`),
      );
      const cutAt = Date.now();
      const cut = await scalar(
        `SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
         WHERE backend_type = 'client backend' AND datname = current_database() AND pid <> pg_backend_pid()`,
      );
      expect(cut).toBeGreaterThanOrEqual(4); // both workers' pools and LISTEN connections
      await waitFor("the second batch done after the cut", () => allDone(2 * BATCH), timeoutMs(60, 300), 100);
      for (const w of workers) expect(errorsSince(w, cutAt).some((m) => m.during === "listening for new jobs")).toBe(true);

      // 3. The server stopped: an enqueue fails fast with a clear error, and writes nothing.
      const stoppedAt = Date.now();
      await server.stop("fast");
      // Long enough for each worker to fail re-subscribing at least twice (its backoff at work).
      await waitFor("both workers to notice the outage", async () =>
        workers.every((w) => errorsSince(w, stoppedAt).filter((m) => m.during === "listening for new jobs").length >= 5),
      );
      for (const through of [db, connect(server.url, { schema: SCHEMA })]) {
        const started = Date.now();
        const outcome = await Promise.race([
          enqueue("steps", { steps: 1, ms: 1 }, { db: through, queue: QUEUE, idempotencyKey: "during-the-outage" }).then(
            (id) => ({ id }),
            (error: Error) => ({ error }),
          ),
          new Promise<{ hung: true }>((r) => setTimeout(() => r({ hung: true }), 4 * OUTAGE_ENQUEUE_BOUND_MS).unref()),
        ]);
        expect(outcome).toHaveProperty("error");
        expect(Date.now() - started).toBeLessThan(OUTAGE_ENQUEUE_BOUND_MS);
        expect((outcome as { error: Error }).error.message).toMatch(/ECONNREFUSED|terminat|shutting down|not queryable/i);
        if (through !== db) await through.close();
      }
      await server.start();
      const faultsEndedAt = Date.now();
      const outageMs = Date.now() - stoppedAt;
      expect(await scalar(`SELECT count(*) AS n FROM ${allJobs(db)} WHERE idempotency_key = 'during-the-outage'`)).toBe(0);
      expect(await scalar(`SELECT count(*) AS n FROM ${allJobs(db)}`)).toBe(2 * BATCH);
      for (const w of workers) {
        // Backoff, not a hot loop: a handful of failed claims per worker for the whole outage.
        const claims = errorsSince(w, stoppedAt).filter((m) => m.during === "claiming jobs").length;
        expect(claims).toBeLessThanOrEqual(Math.ceil(outageMs / 100));
        expect(claims).toBeLessThanOrEqual(12);
      }

      // 4. LISTEN is back: each worker holds a LISTEN connection again, and a new job is picked
      //    up far sooner than the 30 s poll. Two probes: after the first, both workers are in
      //    their poll sleep for sure, so only a notification can explain a quick pickup.
      await waitFor(
        "both workers listening again",
        async () => ((await scalar(`SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'idle' AND query LIKE 'LISTEN %'`)) ?? 0) >= 2,
        45_000,
        100,
      );
      const pickups: number[] = [];
      for (let probe = 0; probe < 2; probe++) {
        const enqueuedAt = Date.now();
        const id = await enqueue("steps", { steps: 1, ms: 1 }, { db, queue: QUEUE });
        acknowledge([id]);
        await waitFor(`probe ${probe} done`, async () => (await getJob(id, { db }))?.status === "done", POLL_INTERVAL * 1000);
        pickups.push(Date.now() - enqueuedAt);
      }
      expect(pickups[1]).toBeLessThan(5000);

      // Nobody crashed; every job is done (at least once), none is left running; clean stop.
      for (const w of workers) expect(w.running).toBe(true);
      expect(await done()).toBe(2 * BATCH + 2);
      expect(await scalar(`SELECT count(*) AS n FROM ${allJobs(db)} WHERE status <> 'done'`)).toBe(0);
      const missing = await scalar(`SELECT count(*) AS n FROM ${allJobs(db, "j")} WHERE NOT EXISTS (SELECT 1 FROM "${SCHEMA}".steps s WHERE s.job_id = j.id)`);
      expect(missing).toBe(0);
      expect((await Promise.all(workers.map((w) => w.stop()))).map((e) => e.code)).toEqual([0, 0]);

      // The history of every run, judged against the table (RELIABILITY.md, "The history checker").
      // Read once the workers stopped: a completion can be in the table before its line is printed.
      // A handler runs once its start write has left; a write cut on its way may go uncounted.
      const finals = await finalJobs((sql) => db.executor.query(sql), allJobs(db));
      const violations = checkHistory([...history, ...historyOf(workers)], finals, { uncountedStartsBefore: faultsEndedAt });
      expect(violations, describeViolations(violations)).toEqual([]);
      console.info(`[reliability] postgres restart: ${2 * BATCH + 2} jobs, outage ${outageMs} ms, probe pickups ${pickups.join(" / ")} ms`);
    },
    timeoutMs(180, 600),
  );
});
