// Point 1 of the reliability issue: worker processes killed with SIGKILL while they hold jobs.
// Proves at-least-once delivery, "no job lost on a crash", reclaim within lease + one sweep,
// and that only the jobs a dead worker held ever run twice.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueueMany, getJob, WORKER_LOST_PREFIX } from "../../src/index.js";
import { allJobs, backends, waitFor, type TestDatabase } from "../helpers/backends.js";
import { Fleet } from "./helpers/fleet.js";
import { inList } from "./helpers/dialect.js";
import { effectTables } from "./helpers/effects.js";
import { died, enqueued, finalJobs, historyOf, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { count, expectSettled, finished } from "./helpers/queue.js";
import { LONG, scaled, timeoutMs } from "./helpers/scale.js";

const JOBS = scaled(1200, 5000);
const KILLS = scaled(5, 10);
const WORKERS = 4;
const LEASE = 2;
const SWEEP = 0.5;
/** Scheduling slack on a loaded two-core machine, on top of "lease + one sweep". */
const SLACK = 1.0;
const QUEUE = "killed";

interface Held {
  id: number;
  workerId: string;
  lockedUntil: Date;
  heartbeatAt: Date;
  /** Its handler had started (the attempt was counted), as opposed to held unstarted in the buffer. */
  started: boolean;
  /** When the suite first saw it no longer held by the dead worker (database clock). */
  reclaimedAt?: Date;
}

describe.each(backends())("killed worker processes ($name)", (backend) => {
  let t: TestDatabase;
  let fleet: Fleet | undefined;
  let effects: string;
  let first: string;

  beforeAll(async () => {
    t = await backend.create();
    ({ effects, first } = await effectTables(t));
  });
  afterAll(async () => {
    await fleet?.kill();
    await t.close();
  });

  it(
    `${JOBS} jobs on ${WORKERS} worker processes, ${KILLS} of them SIGKILLed and restarted: every job ends, only a dead worker's jobs run twice`,
    async () => {
      fleet = new Fleet(
        {
          url: t.url,
          schema: t.schema,
          queue: QUEUE,
          concurrency: 5,
          lease: LEASE,
          sweepInterval: SWEEP,
          pollInterval: 0.2,
          poolSize: 5,
          tables: { effects, first },
          history: true,
        },
        WORKERS,
      );
      const slots = fleet.slots;
      await fleet.started();

      // 2% of the jobs fail on purpose (retryable: false); the rest take 20-80 ms each.
      const failing = new Set<number>();
      const ids = await enqueueMany(
        Array.from({ length: JOBS }, (_, i) => ({ task: "effect", payload: { ms: 20 + ((i * 37) % 61), fail: i % 50 === 7 }, maxAttempts: 25 })),
        { db: t.db, queue: QUEUE },
      );
      ids.forEach((id, i) => i % 50 === 7 && failing.add(id));
      const history: HistoryEvent[] = ids.map((id) => enqueued(id, "test"));

      // Watches the jobs each dead worker held until they are taken back, timing it on the database clock.
      const held: Held[] = [];
      const killed: string[] = [];
      /** Adds the jobs a dead worker holds now that are not listed yet. */
      const collect = async (workerId: string) => {
        const rows = await t.sql<{ id: number | string; started: unknown }>(
          `SELECT id, started_at IS NOT NULL AS started FROM {jobs} WHERE status = 'running' AND locked_by = $1`,
          [workerId],
        );
        for (const { id, started } of rows) {
          const known = held.find((h) => h.id === Number(id) && h.workerId === workerId && !h.reclaimedAt);
          // A start write sent just before the kill can still commit after it.
          if (known) {
            known.started ||= Boolean(Number(started));
            continue;
          }
          if (held.some((h) => h.id === Number(id) && h.workerId === workerId)) continue;
          const job = await getJob(Number(id), { db: t.db });
          if (job?.status !== "running") continue; // taken back already (its lease had run out)
          held.push({ id: job.id, workerId, lockedUntil: job.lockedUntil, heartbeatAt: job.heartbeatAt, started: Boolean(Number(started)) });
        }
      };
      let watching = true;
      const watcher = (async () => {
        while (watching || held.some((h) => !h.reclaimedAt)) {
          // A claim the worker sent just before it died can still commit after it is gone (the
          // server finishes the statement): look for such jobs again on every round.
          for (const workerId of killed) await collect(workerId);
          const open = held.filter((h) => !h.reclaimedAt);
          for (const workerId of new Set(open.map((h) => h.workerId))) {
            const mine = open.filter((h) => h.workerId === workerId);
            const still = await t.sql<{ id: number | string }>(
              `SELECT id FROM {jobs} WHERE status = 'running' AND locked_by = $1 AND ${inList("id", mine.length, 2)}`,
              [workerId, ...mine.map((h) => h.id)],
            );
            const now = await t.now();
            const stillHeld = new Set(still.map((r) => Number(r.id)));
            for (const h of mine) if (!stillHeld.has(h.id)) h.reclaimedAt = now;
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      })();

      for (let k = 1; k <= KILLS; k++) {
        await waitFor(
          `${Math.round((100 * k) / (KILLS + 1))}% of the jobs finished`,
          async () => (await finished(t, QUEUE)) >= (JOBS * k) / (KILLS + 1),
          timeoutMs(60, 300),
        );
        // A victim that holds jobs right now (running or prefetched), chosen at random.
        const victim = await waitFor("a live worker holding jobs", async () => {
          const rows = await t.sql<{ locked_by: string }>(`SELECT DISTINCT locked_by FROM {jobs} WHERE status = 'running' AND queue = $1`, [QUEUE]);
          const holding = new Set(rows.map((r) => r.locked_by));
          const candidates = slots.map((c, slot) => ({ c, slot })).filter(({ c }) => c.running && holding.has(c.label));
          return candidates.length ? candidates[Math.floor(Math.random() * candidates.length)] : undefined;
        });
        history.push(died(victim.c.label));
        victim.c.kill("SIGKILL");
        expect(await victim.c.exited).toMatchObject({ signal: "SIGKILL" });
        killed.push(victim.c.label);
        await collect(victim.c.label);
        fleet.start(victim.slot);
      }

      await waitFor("every job to finish", async () => (await finished(t, QUEUE)) === JOBS, timeoutMs(90, 600), 200);
      watching = false;
      await watcher;
      await expectSettled(t.db, QUEUE, JOBS);

      // Reclaimed within the lease plus one sweep (plus scheduling slack), by the database clock.
      expect(held.length).toBeGreaterThan(0);
      const late = held.filter((h) => h.reclaimedAt!.getTime() - h.lockedUntil.getTime() > (SWEEP + SLACK) * 1000);
      expect(late).toEqual([]);
      for (const h of held) {
        expect(h.reclaimedAt!.getTime() - h.heartbeatAt.getTime()).toBeLessThanOrEqual((LEASE + SWEEP + SLACK) * 1000);
      }

      // Every job ran at least once; every job is done unless its handler chose to fail.
      expect(await count(t, `SELECT count(*) AS n FROM ${first}`)).toBe(JOBS);
      const failed = await t.sql<{ id: number | string; last_error: string }>(`SELECT id, last_error FROM {all} WHERE queue = $1 AND status = 'failed'`, [
        QUEUE,
      ]);
      expect(new Set(failed.map((r) => Number(r.id)))).toEqual(failing);
      for (const r of failed) expect(r.last_error).toContain(`handler chose to fail job ${r.id}`);

      // Only jobs a killed worker held ran more than once, and every earlier run was in a killed worker.
      const heldIds = new Set(held.map((h) => h.id));
      const twice = await t.sql<{ job_id: number | string }>(`SELECT job_id FROM ${effects} GROUP BY job_id HAVING count(*) > 1`);
      for (const r of twice) expect(heldIds).toContain(Number(r.job_id));
      const earlier = await t.sql<{ job_id: number | string; worker: string }>(
        `SELECT e.job_id, e.worker FROM ${effects} e JOIN {all as j} ON j.id = e.job_id WHERE e.attempt <> j.attempts`,
      );
      for (const r of earlier) expect(killed).toContain(r.worker);
      const retried = await t.sql<{ id: number | string }>(`SELECT id FROM {all} WHERE queue = $1 AND attempts > 1`, [QUEUE]);
      for (const r of retried) expect(heldIds).toContain(Number(r.id));

      // A reclaimed job keeps the reclaim's verdict in last_error after its later success. Only
      // a started run gets one: a job held unstarted goes back with no verdict and no attempt used.
      const lastHolder = new Map(held.filter((h) => h.started).map((h) => [h.id, h.workerId]));
      for (const [id, workerId] of lastHolder) {
        if (failing.has(id)) continue;
        const job = await getJob(id, { db: t.db });
        expect(job).toMatchObject({ status: "done" });
        expect(job!.lastError).toMatch(new RegExp(`^${WORKER_LOST_PREFIX}: attempt \\d+ of 25 held by ${workerId.replace(".", "\\.")} `));
      }
      const clean = await count(t, `SELECT count(*) AS n FROM {all} WHERE queue = $1 AND status = 'done' AND last_error IS NULL`, [QUEUE]);
      expect(clean).toBe(JOBS - failing.size - new Set([...lastHolder.keys()].filter((id) => !failing.has(id))).size);

      // The survivors shut down cleanly.
      expect((await fleet.stop()).map((e) => e.code)).toEqual(new Array(WORKERS).fill(0));

      // The history of every run, judged against the table (RELIABILITY.md, "The history checker").
      // Read once every worker stopped: a completion can be in the table before its line is printed.
      const violations = checkHistory([...history, ...historyOf(fleet.all)], await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db)));
      expect(violations, describeViolations(violations)).toEqual([]);
      console.info(
        `[reliability] ${backend.name}: ${JOBS} jobs, ${KILLS} kills, ${held.length} jobs held by dead workers, ${twice.length} ran twice; ` +
          `max reclaim after lease end ${Math.max(...held.map((h) => h.reclaimedAt!.getTime() - h.lockedUntil.getTime()))} ms${LONG ? " (long)" : ""}`,
      );
    },
    timeoutMs(150, 900),
  );
});
