// Point 1 of issue 17: the primary of a real HA cluster dies under load. Patroni (Raft DCS) runs
// a primary and a standby on loopback, HAProxy routes to whichever is the primary
// (tools/ha/cluster.sh); producers enqueue and 4 worker processes work through HAProxy; the
// test SIGKILLs the primary's Patroni and postmaster, Patroni promotes the standby, and the
// history checker judges every run. Synchronous replication: no acknowledged job lost.
// Asynchronous: the same run, measuring what was lost instead of asserting (it may be nothing).
import { writeFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { connect, enqueue, getJob, migrate, type JobsDatabase } from "../../src/index.js";
import { allJobs, waitFor } from "../helpers/backends.js";
import { Fleet } from "./helpers/fleet.js";
import { HA_MISSING_NOTICE, haAvailable, startHaCluster, type HaCluster } from "./helpers/ha-cluster.js";
import { enqueued, finalJobs, historyOf, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { sleep } from "./helpers/queue.js";
import { scaled, timeoutMs } from "./helpers/scale.js";

const AVAILABLE = haAvailable();
// In CI .ci/run installs the packages: a missing one there must fail, not skip.
const RUN = AVAILABLE || process.env.CI === "true";
if (!RUN) console.info(HA_MISSING_NOTICE);

const SCHEMA = "failover";
const QUEUE = "failover";
const JOBS = scaled(200, 4000);
/** The primary dies once this many enqueues were acknowledged. */
const KILL_AFTER = Math.floor(JOBS / 4);
/** A lease far shorter than the failover (about 10 s): runs caught by it are reclaimed, not lost. */
const LEASE = 4;
/** Attempts to outlast the failover: each lease that runs out during it costs one. */
const MAX_ATTEMPTS = 20;
/** Far longer than the test: a job picked up quickly after the failover was woken by LISTEN. */
const POLL_INTERVAL = 30;
const WORKERS = 4;
const PRODUCERS = 2;

/**
 * Where the run is and when it got there: a run that overstays its timeout names the step it was
 * in, with Patroni's view of the cluster, instead of a bare "test timed out".
 */
const phases: { name: string; at: number }[] = [];
function phase(name: string): void {
  phases.push({ name, at: Date.now() });
}
function phaseLog(): string {
  const start = phases[0]?.at ?? Date.now();
  return phases.map((p) => `${p.name} +${p.at - start} ms`).join(", ");
}

interface Run {
  killAt: number;
  killed: string;
  /** The first moment the new primary answered through HAProxy. */
  writableAt: number;
  acknowledged: number[];
  /** The producers' part; the workers' is read once they have stopped (nothing left unprinted). */
  history: HistoryEvent[];
  fleet: Fleet;
}

/** Producers, workers, the kill; returns once every acknowledged job is in a final state. */
async function runThroughFailover(cluster: HaCluster, db: JobsDatabase): Promise<Run> {
  const fleet = new Fleet(
    {
      url: cluster.url,
      schema: SCHEMA,
      queue: QUEUE,
      concurrency: 4,
      lease: LEASE,
      sweepInterval: 0.5,
      pollInterval: POLL_INTERVAL,
      poolSize: 6,
      tables: {},
      history: true,
    },
    WORKERS,
    { prefix: `${cluster.mode}-w` },
  );
  try {
    return await drive(cluster, db, fleet);
  } catch (error) {
    await fleet.kill();
    throw error;
  }
}

async function drive(cluster: HaCluster, db: JobsDatabase, fleet: Fleet): Promise<Run> {
  phase("workers starting");
  // Not fleet.started(): four tsx processes booting on a busy machine can take over 20 s.
  await Promise.all(fleet.slots.map((c) => c.waitForMessage("started", (m) => m.type === "worker:started", 90_000)));
  const history: HistoryEvent[] = [];
  const acknowledged: number[] = [];
  // Each producer retries an enqueue until it is acknowledged, with the same idempotency key:
  // an enqueue whose answer was lost in the failover may have committed, and must not be doubled.
  let givenUp = false;
  // What each producer last failed with: a run that stalls says why, not only that it stalled.
  const lastErrors = new Map<number, { error: string; at: number; tries: number }>();
  const producer = async (p: number) => {
    for (let i = p; i < JOBS && !givenUp; i += PRODUCERS) {
      while (!givenUp) {
        try {
          const id = await enqueue("nap", { ms: 20 }, { db, queue: QUEUE, maxAttempts: MAX_ATTEMPTS, idempotencyKey: `${cluster.mode}-${i}` });
          acknowledged.push(id);
          history.push(enqueued(id, `producer${p}`));
          break;
        } catch (error) {
          const tries = (lastErrors.get(p)?.tries ?? 0) + 1;
          lastErrors.set(p, { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error), at: Date.now(), tries });
          await sleep(100);
        }
      }
      await sleep(25);
    }
  };
  phase("producing");
  const producing = Promise.all(Array.from({ length: PRODUCERS }, (_, p) => producer(p)));
  await waitFor("the first quarter acknowledged", async () => acknowledged.length >= KILL_AFTER, 60_000);
  const killAt = Date.now();
  phase("killing the primary");
  const killed = await cluster.killPrimary();
  phase(`killed ${killed}; waiting for a writable primary`);
  const writableAt = await waitFor(
    "a writable primary behind HAProxy",
    async () => {
      const probe = connect(cluster.url, { schema: SCHEMA, poolSize: 1 });
      try {
        const { rows } = await probe.executor.query<{ primary: boolean }>("SELECT NOT pg_is_in_recovery() AS primary");
        return rows[0]?.primary ? Date.now() : undefined;
      } catch {
        return undefined;
      } finally {
        await probe.close().catch(() => undefined);
      }
    },
    90_000,
    100,
  );
  phase("writable again; producers finishing");
  // Producers retry each enqueue until it is acknowledged: without a bound, a cluster that never
  // came back would hold them (and the test) forever without saying where.
  let bound: NodeJS.Timeout | undefined;
  await Promise.race([
    producing,
    new Promise((_, reject) => {
      bound = setTimeout(
        () => {
          const why = [...lastErrors].map(([p, e]) => `producer${p}: ${e.tries} failures, the last ${Date.now() - e.at} ms ago: ${e.error}`).join("; ");
          reject(
            new Error(
              `the producers were still retrying ${timeoutMs(90, 600)} ms after the primary came back (${acknowledged.length} of ${JOBS} acknowledged; ${why || "no failure recorded: an enqueue never returned"})`,
            ),
          );
        },
        timeoutMs(90, 600),
      );
    }),
  ]).finally(() => {
    clearTimeout(bound);
    givenUp = true;
  });
  phase("every job acknowledged; waiting for final states");
  const unfinished = async () => {
    for (const child of fleet.slots) child.assertRunning();
    const { rows } = await db.executor
      .query<{ n: string }>(`SELECT count(*) AS n FROM ${db.table} WHERE status NOT IN ('done', 'failed', 'cancelled')`)
      .catch(() => ({ rows: [{ n: "-1" }] }));
    return Number(rows[0]?.n) === 0;
  };
  await waitFor("every job in a final state", unfinished, timeoutMs(90, 600), 200);
  return { killAt, killed, writableAt, acknowledged, history, fleet };
}

/**
 * When the first completion landed on the new primary, in ms after the kill. The dead
 * postmaster's backends (and its WAL sender) live on for a moment and may still commit — and
 * replicate — what was already under way: those completions come before the outage's gap.
 */
function firstCompletionAfter(run: Run): { ms: number; onTheDyingPrimary: number } {
  const after = run.history
    .filter((e) => e.kind === "completed" && e.accepted && e.at > run.killAt)
    .map((e) => e.at)
    .sort((a, b) => a - b);
  const gap = after.findIndex((at, i) => at - (after[i - 1] ?? run.killAt) > 2000);
  return { ms: (after[gap] ?? Number.NaN) - run.killAt, onTheDyingPrimary: Math.max(0, gap) };
}

describe.skipIf(!RUN).each(["sync", "async"] as const)("failover of the primary of a Patroni cluster (%s replication)", (mode) => {
  let cluster: HaCluster;
  let db: JobsDatabase;

  beforeAll(async () => {
    cluster = await startHaCluster(mode);
    db = connect(cluster.url, { schema: SCHEMA, poolSize: 4 });
    await migrate({ db });
    // The run starts with the standby holding the schema. Asynchronously, a standby still
    // catching up when the primary dies comes up without it (a CI run lost the whole schema
    // so: every enqueue after the failover answered 'relation "failover.jobs" does not
    // exist'); what the async run measures is the jobs lost, not the setup.
    const { rows } = await db.executor.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn");
    await waitFor(
      "the standby to replay the migration",
      async () => {
        const replayed = await db.executor.query<{ n: number | string }>("SELECT count(*) AS n FROM pg_stat_replication WHERE replay_lsn >= $1::pg_lsn", [
          rows[0]!.lsn,
        ]);
        return Number(replayed.rows[0]?.n) > 0;
      },
      60_000,
      100,
    );
  }, 180_000);
  afterEach(async (context) => {
    if (context.task.result?.state === "pass") return;
    const status = await cluster?.status().catch((e: unknown) => `(no status: ${String(e)})`);
    console.info(`[reliability] failover (${mode}) failed in its steps: ${phaseLog()}\n${status}`);
  });
  afterAll(async () => {
    await db?.close().catch(() => undefined);
    await cluster?.stop();
  }, 90_000);

  it(
    mode === "sync"
      ? "no acknowledged job is lost, every job ends done once, workers and LISTEN come back by themselves"
      : "every job that survived ends done; what was lost is measured",
    async () => {
      phases.length = 0;
      const run = await runThroughFailover(cluster, db);
      try {
        expect(await cluster.primary()).not.toBe(run.killed);
        const finals = await finalJobs((sql) => db.executor.query(sql), allJobs(db));
        const lost = run.acknowledged.filter((id) => !finals.some((j) => j.id === id)).length;
        // Every row that exists ends done (no handler fails); nobody had to restart a worker.
        expect(finals.filter((j) => j.status !== "done")).toEqual([]);
        for (const child of run.fleet.slots) expect(child.running).toBe(true);
        expect(run.fleet.all).toHaveLength(WORKERS);
        // Synchronous replication: a commit the client saw was on the standby too.
        if (mode === "sync") expect(lost).toBe(0);

        // LISTEN is back on the new primary: every worker holds a LISTEN connection there, and a
        // new job is picked up far sooner than the 30 s poll. Two probes: after the first, all
        // workers are in their poll sleep for sure, so only a notification explains a quick pickup.
        const endedAt = Date.now();
        phase("waiting for every worker to listen");
        await waitFor(
          "every worker listening on the new primary",
          async () => {
            const { rows } = await db.executor.query<{ n: string }>(
              `SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'idle' AND query LIKE 'LISTEN %'`,
            );
            return Number(rows[0]?.n) >= WORKERS;
          },
          45_000,
          100,
        );
        const listeningAt = Date.now();
        phase("probes");
        const pickups: number[] = [];
        for (let probe = 0; probe < 2; probe++) {
          const enqueuedAt = Date.now();
          const id = await enqueue("nap", { ms: 1 }, { db, queue: QUEUE });
          run.history.push(enqueued(id, "probe"));
          await waitFor(`probe ${probe} done`, async () => (await getJob(id, { db }))?.status === "done", POLL_INTERVAL * 1000);
          pickups.push(Date.now() - enqueuedAt);
        }
        expect(pickups[1]).toBeLessThan(5000);
        // Each worker takes jobs again on the new primary by itself. The run's own jobs may all
        // go to the others while one is still reconnecting (a CI run on a busy machine: one
        // worker completed nothing after the failover, though alive and listening): rounds of
        // short jobs, one per slot of the fleet, until each has completed one since then.
        phase("every worker working again");
        const resumedAfter = (child: (typeof run.fleet.slots)[number]) =>
          historyOf([child]).some((e) => e.kind === "completed" && e.accepted && e.sentAt > run.writableAt);
        for (let round = 0; round < 10 && !run.fleet.slots.every(resumedAfter); round++) {
          const ids: number[] = [];
          for (let i = 0; i < WORKERS * 4; i++) {
            const id = await enqueue("nap", { ms: 200 }, { db, queue: QUEUE });
            run.history.push(enqueued(id, "top-up"));
            ids.push(id);
          }
          await waitFor(
            `top-up round ${round} done`,
            async () => {
              const { rows } = await db.executor.query<{ n: string }>(
                `SELECT count(*) AS n FROM ${allJobs(db)} WHERE id IN (${ids.join(", ")}) AND status <> 'done'`,
              );
              return Number(rows[0]?.n) === 0;
            },
            60_000,
            50,
          );
        }
        phase("stopping the workers");
        expect((await run.fleet.stop()).map((e) => e.code)).toEqual(new Array(WORKERS).fill(0));

        // Stopped, the workers have printed everything: the whole history can be judged.
        run.history.push(...historyOf(run.fleet.all));
        const all = await finalJobs((sql) => db.executor.query(sql), allJobs(db));
        const violations = checkHistory(run.history, all, { uncountedStartsBefore: run.writableAt });
        const uncounted = checkHistory(run.history, all).filter((v) => v.invariant === "attempts-monotonic").length;
        const first = firstCompletionAfter(run);
        console.info(
          `[reliability] failover (${mode}): ${JOBS} jobs, primary writable again ${run.writableAt - run.killAt} ms after the kill, ` +
            `first completion there ${first.ms} ms after it (${first.onTheDyingPrimary} completions landed on the dying primary first), ` +
            `all jobs ended ${endedAt - run.killAt} ms, every worker listening again ${listeningAt - run.killAt} ms after it; ` +
            `probe pickups ${pickups.join(" / ")} ms; acknowledged lost: ${lost}; runs whose start write was lost: ${uncounted}; ` +
            `history violations: ${violations.length === 0 ? "none" : describeViolations(violations).replace(/\n/g, "; ")}`,
        );
        if (violations.length > 0)
          writeFileSync(`/tmp/forge-failover-${mode}-history.json`, JSON.stringify({ run: { ...run, fleet: undefined }, finals: all }, null, 1));
        // Each worker went on working on the new primary by itself.
        for (const child of run.fleet.slots) expect(resumedAfter(child), `${child.label} completed nothing after the failover`).toBe(true);
        if (mode === "sync") expect(violations, describeViolations(violations)).toEqual([]);
      } finally {
        await run.fleet.kill();
      }
    },
    // Above the sum of the steps' own waits on a loaded CI machine, so a stuck step fails with its name.
    timeoutMs(360, 900),
  );
});
