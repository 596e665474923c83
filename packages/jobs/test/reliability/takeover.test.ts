// Point 3 of the reliability issue: forced lease expiries while handlers still run. A driver
// keeps calling reclaim({ lease: 0 }) under workers whose handlers heartbeat, checkpoint (with
// their own writes in the checkpoint's transaction), fail and complete. No write of a run that
// lost its job may land: not a completion, a failure, a heartbeat nor a checkpoint.
//
// How "landed after the takeover" is told apart, on every backend: one ledger table with an
// auto-increment `seq`. The driver runs each reclaim in a transaction that also writes a
// `reclaim` row per job it took (job, attempt): a write of that attempt that was accepted after
// the takeover would have to commit after it, so its row would carry a larger seq. The fenced
// UPDATE holds the job's row lock until COMMIT, so an accepted write's row always comes first.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorker, enqueue, enqueueMany, getJob, reclaim, WORKER_LOST_PREFIX, type JobContext, type Worker } from "../../src/index.js";
import { claimJobs } from "../../src/run/claim.js";
import { completeRuns } from "../../src/run/complete.js";
import { allJobs, backends, type TestDatabase } from "../helpers/backends.js";
import { keyText, serialColumn } from "./helpers/dialect.js";
import { claimedBy, completedBy, enqueued, finalJobs, historyRecorder, reclaimedBy, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { count, expectSettled, sleep } from "./helpers/queue.js";
import { scaled, timeoutMs } from "./helpers/scale.js";
import { driveTakeovers } from "./helpers/takeovers.js";

const TAKEOVERS = scaled(250, 1000);
const QUEUE = "contested";
const STEPS = 6;
const WORKERS = 2;
const CONCURRENCY = 4;

type Write = "start" | "complete" | "fail" | "snooze" | "release" | "heartbeat" | "checkpoint" | "step" | "sleep" | "progress";

describe.each(backends())("takeover under load ($name)", (backend) => {
  let t: TestDatabase;
  let ledger: string;

  beforeAll(async () => {
    t = await backend.create();
    ledger = t.tableName("ledger");
    const text = keyText(t.db.dialect);
    await t.sql(
      `CREATE TABLE ${ledger} (${serialColumn(t.db.dialect)}, job_id bigint NOT NULL, attempt integer NOT NULL, kind ${text} NOT NULL, step integer, tag ${text})`,
    );
  });
  afterAll(() => t.close());

  /** The history of every run in `queue` (RELIABILITY.md, "The history checker"), judged against its rows. */
  async function expectHistoryKept(queue: string, history: readonly HistoryEvent[]): Promise<void> {
    const violations = checkHistory(history, await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db), queue));
    expect(violations, describeViolations(violations)).toEqual([]);
  }

  it("a stale run's completion batched with its successor's: only the successor's lands, and only its token is kept", async () => {
    // The exact interleaving the soak below can only hit by chance: one worker finishing the
    // run it lost and the run that took over, in the same completion batch, in either order.
    for (const staleFirst of [true, false]) {
      const queue = `pair-${staleFirst}`;
      const id = await enqueue("pair", null, { db: t.db, queue, maxAttempts: 5 });
      const history: HistoryEvent[] = [enqueued(id, "test")];
      const first = (await claimJobs(t.db, { queues: [queue], limit: 1, start: 1, lease: 60, workerId: "same-worker" })).jobs;
      history.push(...claimedBy("same-worker", first));
      history.push(...reclaimedBy("test", await reclaim({ db: t.db, lease: 0, queue })));
      const second = (await claimJobs(t.db, { queues: [queue], limit: 1, start: 1, lease: 60, workerId: "same-worker" })).jobs;
      history.push(...claimedBy("same-worker", second));
      const [stale, fresh] = [first[0], second[0]];
      const runs = [
        { id, token: stale!.token, result: JSON.stringify("stale") },
        { id, token: fresh!.token, result: JSON.stringify("fresh") },
      ];
      const sentAt = Date.now();
      const kept = await completeRuns(t.db, staleFirst ? runs : runs.reverse());
      history.push(...completedBy("same-worker", [stale!, fresh!], kept, sentAt));
      expect([...kept]).toEqual([fresh!.token]);
      expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: "fresh", attempts: 2 });
      await expectHistoryKept(queue, history);
    }
  });

  it(
    `${TAKEOVERS} forced takeovers of running handlers: no stale completion, failure, heartbeat or checkpoint lands`,
    async () => {
      const started = new Set<string>(); // "job:attempt" whose handler began
      const accepted: string[] = []; // checkpoint work tags the queue said it saved
      const refused: string[] = []; // … and those it said it refused (rolled back)
      const record = (id: number, attempt: number, kind: string, step: number | null, tag: string | null) =>
        t.db.executor.query(`INSERT INTO ${ledger} (job_id, attempt, kind, step, tag) VALUES ($1, $2, $3, $4, $5)`, [id, attempt, kind, step, tag]);

      const contested = async (payload: { steps: number }, ctx: JobContext) => {
        const { id, attempt } = ctx.job;
        started.add(`${id}:${attempt}`);
        await record(id, attempt, "start", null, null);
        let step = (ctx.progress as { step?: number } | null)?.step ?? 0;
        let lost = false;
        while (step < payload.steps) {
          await sleep(2 + Math.random() * 8);
          // A heartbeat, its intent written first: an accepted one must precede any takeover.
          const hb = randomUUID();
          await record(id, attempt, "hb", step, hb);
          if (await ctx.heartbeat()) await record(id, attempt, "hb-ok", step, hb);
          else lost = true;
          // Half of the runs that lost their job carry on regardless, so stale checkpoints are tried too.
          if (lost && Math.random() < 0.5) throw new Error(`attempt ${attempt} of job ${id} noticed it lost the job`);
          const next = step + 1;
          const tag = randomUUID();
          const saved = await ctx.checkpoint({ step: next, attempt }, async (tx) => {
            await t.execOn(tx, `INSERT INTO ${ledger} (job_id, attempt, kind, step, tag) VALUES ($1, $2, 'work', $3, $4)`, [id, attempt, next, tag]);
          });
          (saved ? accepted : refused).push(tag);
          if (!saved) throw new Error(`attempt ${attempt} of job ${id}: checkpoint refused`);
          step = next;
        }
        // Returns even if a heartbeat said the job was lost: the stale completion must be refused.
        return { attempt };
      };

      const fenced: Record<Write, number> = {
        start: 0,
        complete: 0,
        fail: 0,
        snooze: 0,
        release: 0,
        heartbeat: 0,
        checkpoint: 0,
        step: 0,
        sleep: 0,
        progress: 0,
      };
      const errors: unknown[] = [];
      const succeeded: [number, number][] = []; // (job, attempt) the workers reported done
      const stop = new AbortController();
      const history: HistoryEvent[] = [];
      const workers: Worker[] = Array.from({ length: WORKERS }, (_, i) => {
        const recorder = historyRecorder(`taker${i}`, (event) => history.push(event));
        const worker = createWorker(recorder.wrap({ contested }), {
          db: t.db,
          queue: QUEUE,
          concurrency: CONCURRENCY,
          prefetch: 1,
          lease: 30,
          sweepInterval: 0,
          pollInterval: 0.02,
          signal: stop.signal,
          workerId: `taker${i}`,
          events: recorder.events,
        });
        worker.on("job:fenced", (e) => fenced[e.write]++);
        worker.on("job:succeeded", (e) => succeeded.push([e.job.id, e.job.attempt]));
        worker.on("worker:error", (e) => errors.push(e.error));
        return worker;
      });
      const running = workers.map((w) => w.run());

      const { takeovers, reclaimed, total } = await driveTakeovers({
        t,
        queue: QUEUE,
        ledger,
        takeovers: TAKEOVERS,
        started,
        history,
        enqueue: (n) =>
          enqueueMany(
            Array.from({ length: n }, () => ({ task: "contested", payload: { steps: STEPS }, maxAttempts: 100_000 })),
            { db: t.db, queue: QUEUE },
          ),
        first: WORKERS * (CONCURRENCY + 1) * 2,
        refill: WORKERS * CONCURRENCY,
      });
      stop.abort();
      await Promise.all(running);
      await expectSettled(t.db, QUEUE, total);

      const violations = async (what: string, text: string) => ({ what, n: await count(t, text) });
      const checks = await Promise.all([
        // A checkpoint's work committed after its attempt had been taken over.
        violations(
          "stale checkpoint",
          `SELECT count(*) AS n FROM ${ledger} w JOIN ${ledger} r ON r.job_id = w.job_id AND r.attempt = w.attempt
           WHERE w.kind = 'work' AND r.kind = 'reclaim' AND w.seq > r.seq`,
        ),
        // A heartbeat begun after the takeover that was nevertheless accepted.
        violations(
          "stale heartbeat",
          `SELECT count(*) AS n FROM ${ledger} h JOIN ${ledger} ok ON ok.tag = h.tag AND ok.kind = 'hb-ok'
           JOIN ${ledger} r ON r.job_id = h.job_id AND r.attempt = h.attempt AND r.kind = 'reclaim'
           WHERE h.kind = 'hb' AND h.seq > r.seq`,
        ),
        // The completing attempt was taken over (its completion should have been refused).
        violations(
          "stale completion",
          `SELECT count(*) AS n FROM {all as j} JOIN ${ledger} r ON r.job_id = j.id AND r.attempt = j.attempts AND r.kind = 'reclaim' WHERE j.queue = '${QUEUE}'`,
        ),
        // A handler's own failure landed (every failure in this test came from a run that had lost its job).
        violations(
          "stale failure",
          `SELECT count(*) AS n FROM {all} WHERE queue = '${QUEUE}' AND last_error IS NOT NULL AND last_error NOT LIKE '${WORKER_LOST_PREFIX}%'`,
        ),
      ]);
      expect(checks).toEqual(checks.map(({ what }) => ({ what, n: 0 })));

      // Each job's result names its final attempt; its progress is the last checkpoint that landed.
      const jobs = await t.sql<{ id: number | string; attempts: number | string; result: unknown; progress: unknown }>(
        `SELECT id, attempts, result, progress FROM {all} WHERE queue = $1`,
        [QUEUE],
      );
      const lastWork = new Map<number, { attempt: number; step: number }>();
      const work = await t.sql<{ job_id: number | string; attempt: number | string; step: number | string }>(
        `SELECT job_id, attempt, step FROM ${ledger} WHERE kind = 'work' ORDER BY seq`,
      );
      for (const w of work) lastWork.set(Number(w.job_id), { attempt: Number(w.attempt), step: Number(w.step) });
      for (const job of jobs) {
        const parse = (v: unknown) => (typeof v === "string" ? JSON.parse(v) : v) as Record<string, number>;
        expect(parse(job.result)).toEqual({ attempt: Number(job.attempts) });
        expect(parse(job.progress)).toEqual({ step: STEPS, attempt: lastWork.get(Number(job.id))!.attempt });
        expect(lastWork.get(Number(job.id))!.step).toBe(STEPS);
      }

      // The workers reported exactly one success per job, by its final attempt: a stale run's
      // completion (even one batched with its successor's) is reported fenced, not done.
      const finalAttempt = new Map(jobs.map((j) => [Number(j.id), Number(j.attempts)]));
      expect(succeeded.filter(([id, attempt]) => finalAttempt.get(id) !== attempt)).toEqual([]);
      expect(succeeded.length).toBe(total);

      // What the handlers were told matches what is in the table: refused batches rolled back.
      const tags = new Set((await t.sql<{ tag: string }>(`SELECT tag FROM ${ledger} WHERE kind = 'work'`)).map((r) => r.tag));
      expect(refused.filter((tag) => tags.has(tag))).toEqual([]);
      expect(accepted.filter((tag) => !tags.has(tag))).toEqual([]);

      // The stale writes were really tried, and refused (events), across every kind of write.
      expect(takeovers).toBeGreaterThanOrEqual(TAKEOVERS);
      expect(fenced.heartbeat).toBeGreaterThan(0);
      expect(fenced.checkpoint).toBe(refused.length);
      expect(refused.length).toBeGreaterThan(0);
      expect(fenced.complete + fenced.fail).toBeGreaterThan(0);
      expect(errors).toEqual([]);
      // The history of every run (RELIABILITY.md, "The history checker"): the refused stale writes are in it.
      expect(history.filter((e) => (e.kind === "completed" || e.kind === "failed" || e.kind === "heartbeat") && !e.accepted).length).toBeGreaterThan(0);
      await expectHistoryKept(QUEUE, history);
      console.info(
        `[reliability] ${backend.name}: ${takeovers} takeovers of started runs (${reclaimed} reclaims) over ${total} jobs; ` +
          `refused: ${Object.entries(fenced)
            .map(([k, v]) => `${k} ${v}`)
            .join(", ")}`,
      );
    },
    timeoutMs(120, 600),
  );
});
