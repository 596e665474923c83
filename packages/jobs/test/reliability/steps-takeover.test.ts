// Issue 35 point 5, second half: forced takeovers of handlers in the middle of their durable
// steps. A driver keeps calling reclaim({ lease: 0 }) under workers whose handlers run steps
// that write through `tx`; a run that lost its job must have each later step refused
// (JobAbortedError, job:fenced write "step") with its tx writes rolled back, and every step's
// write must land exactly once, by the run that saved the step.
//
// "Landed after the takeover" is told apart as in takeover.test.ts: one ledger table with an
// auto-increment `seq`; each reclaim runs in a transaction that writes a `reclaim` row per job
// it took (job, attempt), so a step of that attempt saved after the takeover would have its
// `work` row committed after it, with a larger seq (the save locks the job's row until COMMIT).
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorker, enqueueMany, JobAbortedError, type JobContext, type Worker } from "../../src/index.js";
import { allJobs, backends, type TestDatabase } from "../helpers/backends.js";
import { keyText, serialColumn } from "./helpers/dialect.js";
import { finalJobs, historyRecorder, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { count, expectSettled, sleep } from "./helpers/queue.js";
import { LONG, scaled, timeoutMs } from "./helpers/scale.js";
import { driveTakeovers } from "./helpers/takeovers.js";

const TAKEOVERS = scaled(150, 1000);
const QUEUE = "stepped-contested";
const STEPS = 5;
const WORKERS = 2;
const CONCURRENCY = 4;

describe.each(backends())("takeovers of durable steps ($name)", (backend) => {
  let t: TestDatabase;
  let ledger: string;

  beforeAll(async () => {
    t = await backend.create();
    ledger = t.tableName("step_ledger");
    const text = keyText(t.db.dialect);
    await t.sql(
      `CREATE TABLE ${ledger} (${serialColumn(t.db.dialect)}, job_id bigint NOT NULL, attempt integer NOT NULL, kind ${text} NOT NULL, step integer, tag ${text})`,
    );
  });
  afterAll(() => t.close());

  it(
    `${TAKEOVERS} forced takeovers of runs in their steps: a stale run's step is refused and rolled back, each step's tx write lands once`,
    async () => {
      const started = new Set<string>(); // "job:attempt" whose handler began
      const ran: { job: number; step: number; attempt: number }[] = []; // step functions that began
      const refusedTags: string[] = []; // tx writes of steps the queue refused (rolled back)
      let refusals = 0; // ctx.step calls that threw JobAbortedError

      const stepped = async (_payload: unknown, ctx: JobContext) => {
        const { id, attempt } = ctx.job;
        started.add(`${id}:${attempt}`);
        const results: { step: number; attempt: number }[] = [];
        for (let step = 1; step <= STEPS; step++) {
          await sleep(2 + Math.random() * 8);
          const tag = randomUUID();
          let began = false;
          try {
            results.push(
              await ctx.step(`s${step}`, async (tx) => {
                began = true;
                ran.push({ job: id, step, attempt });
                await t.execOn(tx, `INSERT INTO ${ledger} (job_id, attempt, kind, step, tag) VALUES ($1, $2, 'work', $3, $4)`, [id, attempt, step, tag]);
                return { step, attempt };
              }),
            );
          } catch (error) {
            if (error instanceof JobAbortedError) {
              refusals++;
              if (began) refusedTags.push(tag);
            }
            throw error;
          }
        }
        return { steps: results };
      };

      const fencedSteps = { n: 0 };
      const errors: unknown[] = [];
      const stop = new AbortController();
      const history: HistoryEvent[] = [];
      const workers: Worker[] = Array.from({ length: WORKERS }, (_, i) => {
        const recorder = historyRecorder(`stepper${i}`, (event) => history.push(event));
        const worker = createWorker(recorder.wrap({ stepped }), {
          db: t.db,
          queue: QUEUE,
          concurrency: CONCURRENCY,
          prefetch: 1,
          lease: 30,
          sweepInterval: 0,
          pollInterval: 0.02,
          signal: stop.signal,
          workerId: `stepper${i}`,
          events: recorder.events,
        });
        worker.on("job:fenced", (e) => e.write === "step" && fencedSteps.n++);
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
            Array.from({ length: n }, () => ({ task: "stepped", payload: null, maxAttempts: 100_000 })),
            { db: t.db, queue: QUEUE },
          ),
        first: WORKERS * (CONCURRENCY + 1) * 2,
        refill: WORKERS * CONCURRENCY,
      });
      stop.abort();
      await Promise.all(running);
      await expectSettled(t.db, QUEUE, total);

      // No step's write committed after its attempt had been taken over.
      const stale = await count(
        t,
        `SELECT count(*) AS n FROM ${ledger} w JOIN ${ledger} r ON r.job_id = w.job_id AND r.attempt = w.attempt
         WHERE w.kind = 'work' AND r.kind = 'reclaim' AND w.seq > r.seq`,
      );
      expect(stale).toBe(0);

      // Each step's write landed exactly once, by the attempt its saved step names.
      const work = await t.sql<{ job_id: number | string; attempt: number | string; step: number | string; tag: string }>(
        `SELECT job_id, attempt, step, tag FROM ${ledger} WHERE kind = 'work'`,
      );
      const committed = new Map<string, number>();
      const twice: string[] = [];
      for (const w of work) {
        const key = `${Number(w.job_id)}:${Number(w.step)}`;
        if (committed.has(key)) twice.push(key);
        committed.set(key, Number(w.attempt));
      }
      expect(twice).toEqual([]);
      expect(committed.size).toBe(total * STEPS);
      const saved = await t.sql<{ job_id: number | string; name: string }>(`SELECT job_id, name FROM ${t.tableName("jobs_steps")}`);
      expect(saved.length).toBe(total * STEPS);
      expect(saved.filter((s) => !committed.has(`${Number(s.job_id)}:${s.name.slice(1)}`))).toEqual([]);

      // The refused steps' writes rolled back; each refusal was reported as job:fenced "step".
      const tags = new Set(work.map((w) => w.tag));
      expect(refusedTags.filter((tag) => tags.has(tag))).toEqual([]);
      expect(fencedSteps.n).toBe(refusals);
      expect(refusedTags.length).toBeGreaterThan(0);

      // No step's function ran in an attempt later than the one that committed it (a stale,
      // earlier run may begin a step already saved by its successor: its save is refused).
      expect(ran.filter((r) => r.attempt > committed.get(`${r.job}:${r.step}`)!)).toEqual([]);

      // Every job's result lists its steps' saved results, whichever attempts ran them.
      const jobs = await t.sql<{ id: number | string; result: unknown }>(`SELECT id, result FROM {all} WHERE queue = $1`, [QUEUE]);
      for (const job of jobs) {
        const id = Number(job.id);
        const result = typeof job.result === "string" ? (JSON.parse(job.result) as unknown) : job.result;
        const expected = Array.from({ length: STEPS }, (_, i) => ({ step: i + 1, attempt: committed.get(`${id}:${i + 1}`) }));
        expect({ id, result }).toEqual({ id, result: { steps: expected } });
      }

      expect(takeovers).toBeGreaterThanOrEqual(TAKEOVERS);
      expect(errors).toEqual([]);
      // The history of every run, its steps' saves and refusals in it (RELIABILITY.md, "The history checker").
      expect(history.filter((e) => e.kind === "step" && !e.accepted).length).toBe(refusals);
      const violations = checkHistory(history, await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db), QUEUE));
      expect(violations, describeViolations(violations)).toEqual([]);
      console.info(
        `[reliability] ${backend.name}: ${takeovers} takeovers of started runs (${reclaimed} reclaims) over ${total} jobs of ${STEPS} steps; ` +
          `${refusals} stale steps refused (${refusedTags.length} after their function ran, writes rolled back)${LONG ? " (long)" : ""}`,
      );
    },
    timeoutMs(120, 600),
  );
});
