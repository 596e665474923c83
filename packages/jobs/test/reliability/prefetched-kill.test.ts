// Audit 12.1: a worker SIGKILLed while it holds prefetched jobs. Jobs that no handler started
// must come back pending with their attempts unchanged — with the default `maxAttempts: 1`
// they would otherwise end `failed` without ever having run.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { drain, enqueueMany, reclaim, WORKER_LOST_PREFIX } from "../../src/index.js";
import { allJobs, backends, waitFor, type TestDatabase } from "../helpers/backends.js";
import type { WorkerConfig } from "./fixtures/worker.js";
import { Child, fixture, killAll } from "./helpers/children.js";
import { effectTables } from "./helpers/effects.js";
import { died, enqueued, finalJobs, historyOf, historyRecorder, reclaimedBy, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { count } from "./helpers/queue.js";

const QUEUE = "prefetched";
const CONCURRENCY = 10;
const PREFETCH = 20;

describe.each(backends())("a killed worker's prefetched jobs ($name)", (backend) => {
  let t: TestDatabase;
  const children: Child[] = [];

  beforeAll(async () => {
    t = await backend.create();
  });
  afterAll(async () => {
    await killAll(children);
    await t.close();
  });

  it("jobs no handler started go back pending with their attempts unchanged; started ones get the worker-lost verdict", async () => {
    const { effects, first } = await effectTables(t);
    // Handlers that outlive the test: 10 run, 20 wait in the worker's buffer.
    const ids = await enqueueMany(
      Array.from({ length: CONCURRENCY + PREFETCH }, () => ({ task: "effect", payload: { ms: 600_000 } })),
      { queue: QUEUE, db: t.db },
    );
    const history: HistoryEvent[] = ids.map((id) => enqueued(id, "test"));
    const config: WorkerConfig = {
      url: t.url,
      schema: t.schema,
      workerId: "prefetcher",
      queue: QUEUE,
      concurrency: CONCURRENCY,
      prefetch: PREFETCH,
      lease: 30,
      sweepInterval: 0,
      pollInterval: 0.2,
      tables: { effects, first },
      history: true,
    };
    const child = new Child("prefetcher", [fixture("worker.ts"), JSON.stringify(config)]);
    children.push(child);
    await waitFor(
      "10 handlers started and 30 jobs held",
      async () => {
        child.assertRunning();
        const started = await count(t, `SELECT count(*) AS n FROM ${effects}`);
        const held = await count(t, `SELECT count(*) AS n FROM ${t.db.table} WHERE status = 'running'`);
        return started === CONCURRENCY && held === CONCURRENCY + PREFETCH ? true : undefined;
      },
      30_000,
    );
    history.push(died(child.label));
    child.kill("SIGKILL");
    await child.exited;

    // Take back everything the dead worker held, as a sweep would once its lease ended.
    const reclaimed = await reclaim({ lease: 0, queue: QUEUE, db: t.db });
    history.push(...reclaimedBy("test", reclaimed));
    expect(reclaimed).toHaveLength(CONCURRENCY + PREFETCH);

    const ran = new Set((await t.sql<{ job_id: number | string }>(`SELECT job_id FROM ${effects}`)).map((r) => Number(r.job_id)));
    expect(ran.size).toBe(CONCURRENCY);
    const rows = await t.sql<{ id: number | string; status: string; attempts: number | string; last_error: string | null }>(
      `SELECT id, status, attempts, last_error FROM ${allJobs(t.db)} WHERE queue = $1 ORDER BY id`,
      [QUEUE],
    );
    expect(rows.map((r) => Number(r.id))).toEqual(ids);
    for (const row of rows) {
      if (ran.has(Number(row.id))) {
        expect({ id: row.id, status: row.status, attempts: Number(row.attempts) }).toEqual({ id: row.id, status: "failed", attempts: 1 });
        expect(row.last_error).toContain(WORKER_LOST_PREFIX);
      } else {
        expect({ id: row.id, status: row.status, attempts: Number(row.attempts), lastError: row.last_error }).toEqual({
          id: row.id,
          status: "pending",
          attempts: 0,
          lastError: null,
        });
      }
    }

    // The ones handed back unused still have their one attempt: another worker runs them all.
    const finisher = historyRecorder("finisher", (event) => history.push(event));
    const finished = await drain(finisher.wrap({ effect: () => "finished" }), { queue: QUEUE, db: t.db, events: finisher.events });
    expect(finished).toBe(PREFETCH);
    // The history of every run (RELIABILITY.md, "The history checker"): the dead worker's ten
    // end failed by the reclaim's verdict, the twenty others done by their first and only run.
    history.push(...historyOf([child]));
    const violations = checkHistory(history, await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db), QUEUE));
    expect(violations, describeViolations(violations)).toEqual([]);
  }, 90_000);
});
