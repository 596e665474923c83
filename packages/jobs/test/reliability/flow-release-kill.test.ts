// Issue 19 point 6, with real processes: a worker SIGKILLed at random moments around the
// completion of a batch's last items (and of a dependent's last dependencies) leaves the batch
// callback and the dependent runnable exactly once, after the lost jobs are taken back: the
// completion and the release are one transaction, so a kill lands before both or after both.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { drain, enqueue, enqueueBatch, getJob, reclaim } from "../../src/index.js";
import { allJobs, backends, waitFor, type TestDatabase } from "../helpers/backends.js";
import type { WorkerConfig } from "./fixtures/worker.js";
import { Child, fixture, killAll } from "./helpers/children.js";
import { effectTables } from "./helpers/effects.js";
import { died, enqueued, finalJobs, historyOf, historyRecorder, reclaimedBy, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { sleep } from "./helpers/queue.js";

const ROUNDS = 6;

describe.each(backends())("dependents and batch callbacks after a SIGKILLed worker ($name)", (backend) => {
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

  it(`${ROUNDS} rounds: killed while completing the last items, the callback and the dependent each run exactly once`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const queue = `items-${round}`;
      const after = `after-${round}`;
      // Short runs, so the kill (10-70 ms after the worker starts) lands among claims, runs and completions.
      const { ids, callbackId } = await enqueueBatch(
        Array.from({ length: 4 }, (_, i) => ({ task: "effect", payload: { ms: 5 + ((i * 7 + round * 3) % 20) }, maxAttempts: 5 })),
        { db: t.db, queue, onComplete: { task: "callback", payload: { round } } },
      );
      // The callback goes to the `after` queue: only this test's drain runs it, never the doomed worker.
      await t.sql("UPDATE {jobs} SET queue = $1 WHERE id = $2", [after, callbackId]);
      const dependent = await enqueue("dependent", null, { db: t.db, queue: after, dependsOn: ids });
      const history: HistoryEvent[] = [...ids, callbackId as number, dependent].map((id) => enqueued(id, "test"));

      const config: WorkerConfig = {
        url: t.url,
        schema: t.schema,
        workerId: `doomed-${round}`,
        queue,
        concurrency: 4,
        lease: 30,
        sweepInterval: 0,
        pollInterval: 0.02,
        tables,
        history: true,
      };
      const child = new Child(config.workerId, [fixture("worker.ts"), JSON.stringify(config)]);
      children.push(child);
      await child.waitForMessage("started", (m) => m.type === "worker:started", 30_000);
      await sleep(10 + ((round * 13) % 60));
      history.push(died(child.label));
      child.kill("SIGKILL");
      expect(await child.exited).toMatchObject({ signal: "SIGKILL" });

      // After the lease (lease 0: the worker is dead, no heartbeat will come), the rest runs here.
      // A claim the worker sent just before the kill can still be executing on the server (it
      // runs what it received): until it commits its rows are locked and skipped, and after it
      // they are running under the dead worker. So take back and drain until every item is done,
      // as the sweeps of a live deployment would.
      const finisher = historyRecorder(`finisher-${round}`, (event) => history.push(event));
      await waitFor("the dead worker's items taken back and done", async () => {
        history.push(...reclaimedBy("test", await reclaim({ db: t.db, lease: 0, queue })));
        await drain(finisher.wrap({ effect: () => "again" }), { db: t.db, queue, events: finisher.events });
        const statuses = await Promise.all(ids.map(async (id) => (await getJob(id, { db: t.db }))?.status));
        return statuses.every((s) => s === "done");
      });
      expect((await getJob(callbackId as number, { db: t.db }))?.status).toBe("pending");
      expect((await getJob(dependent, { db: t.db }))?.status).toBe("pending");

      const runs: number[] = [];
      const runner = historyRecorder(`after-${round}`, (event) => history.push(event));
      const handlers = runner.wrap({ callback: () => void runs.push(callbackId as number), dependent: () => void runs.push(dependent) });
      expect(await drain(handlers, { db: t.db, queue: after, events: runner.events })).toBe(2);
      expect(runs.sort((a, b) => a - b)).toEqual([callbackId, dependent].sort((a, b) => (a as number) - (b as number)));
      expect(await drain(handlers, { db: t.db, queue: after, events: runner.events })).toBe(0);

      // The round's history (RELIABILITY.md, "The history checker"): the dead worker's lines up to
      // its kill, the test's reclaims, the drains' runs; judged against the round's two queues.
      history.push(...historyOf([child]));
      const query = (sql: string) => t.db.executor.query(sql);
      const finals = [...(await finalJobs(query, allJobs(t.db), queue)), ...(await finalJobs(query, allJobs(t.db), after))];
      const violations = checkHistory(history, finals);
      expect(violations, describeViolations(violations)).toEqual([]);
    }
  }, 180_000);
});
