// Issue 36 point 3 with real processes: strict order per key (`sequence`) holds across worker
// processes that are SIGKILLed mid-run and restarted. Per key, every job ends done, each run
// (every attempt, a killed one included) starts only after the key's previous job completed,
// so the key's jobs complete in enqueue order and never overlap; nothing is lost.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, type DialectName } from "../../src/index.js";
import { allJobs, backends, waitFor, type TestDatabase } from "../helpers/backends.js";
import { keyText, serialColumn } from "./helpers/dialect.js";
import { Fleet, workerRunningJob } from "./helpers/fleet.js";
import { died, enqueued, finalJobs, historyOf, type HistoryEvent } from "./helpers/history.js";
import { checkHistory, describeViolations } from "./helpers/history-check.js";
import { count, expectSettled, finished } from "./helpers/queue.js";
import { LONG, scaled, timeoutMs } from "./helpers/scale.js";

const KEYS = 20;
const PER_KEY = scaled(15, 50);
const JOBS = KEYS * PER_KEY;
const KILLS = scaled(3, 10);
const WORKERS = 3;
const PRODUCERS = 10;
const QUEUE = "sequenced";

/** The time a run began, by the database clock, in the type of the jobs' finished_at (compared in SQL). */
function startedColumn(dialect: DialectName): string {
  switch (dialect) {
    case "postgres":
      return "at timestamptz NOT NULL DEFAULT clock_timestamp()";
    case "sqlite":
      return "at INTEGER NOT NULL DEFAULT (CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))";
    case "mysql":
      return "at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))";
  }
}

describe.each(backends())("sequences in killed worker processes ($name)", (backend) => {
  let t: TestDatabase;
  let fleet: Fleet | undefined;
  let effects: string;
  let first: string;
  let pairs: string;

  beforeAll(async () => {
    t = await backend.create();
    // The fixture's `effect` handler writes (job_id, attempt, worker) here as its run begins; `at` stamps it.
    effects = t.tableName("seq_effects");
    first = t.tableName("seq_first");
    pairs = t.tableName("seq_pairs");
    const d = t.db.dialect;
    await t.sql(
      `CREATE TABLE ${effects} (${serialColumn(d)}, job_id bigint NOT NULL, attempt integer NOT NULL, worker ${keyText(d)} NOT NULL, ${startedColumn(d)})`,
    );
    await t.sql(`CREATE TABLE ${first} (job_id bigint NOT NULL PRIMARY KEY, attempt integer NOT NULL)`);
    await t.sql(`CREATE TABLE ${pairs} (job_id bigint NOT NULL PRIMARY KEY, previous_id bigint NOT NULL)`);
  });
  afterAll(async () => {
    await fleet?.kill();
    await t.close();
  });

  it(
    `${JOBS} jobs over ${KEYS} keys on ${WORKERS} worker processes, ${KILLS} SIGKILLed mid-run: per key, all done, in enqueue order, never overlapping`,
    async () => {
      const began = Date.now();
      fleet = new Fleet(
        {
          url: t.url,
          schema: t.schema,
          queue: QUEUE,
          concurrency: 4,
          lease: 2,
          sweepInterval: 0.5,
          pollInterval: 0.05,
          poolSize: 5,
          tables: { effects, first },
          history: true,
        },
        WORKERS,
      );
      await fleet.started();

      // Producers enqueue while the fleet runs, keys interleaved; a key's order is its ids' order
      // (each enqueue of a key commits after the previous one, and takes its id after it).
      const ids = new Map<number, number[]>(Array.from({ length: KEYS }, (_, k) => [k, []]));
      const history: HistoryEvent[] = [];
      const ms = t.db.dialect === "sqlite" ? 10 : 25;
      const producing = Promise.all(
        Array.from({ length: PRODUCERS }, async (_, p) => {
          for (let n = p; n < JOBS; n += PRODUCERS) {
            const key = n % KEYS;
            const id = await enqueue("effect", { ms }, { db: t.db, queue: QUEUE, sequence: `key-${key}`, maxAttempts: 5 });
            ids.get(key)!.push(id);
            history.push(enqueued(id, "test"));
          }
        }),
      );

      let kills = 0;
      for (let k = 1; k <= KILLS; k++) {
        await waitFor(
          `${Math.round((100 * k) / (KILLS + 1))}% of the jobs finished`,
          async () => (await finished(t, QUEUE)) >= (JOBS * k) / (KILLS + 1),
          timeoutMs(60, 300),
        );
        const victim = await workerRunningJob(t, fleet, QUEUE, timeoutMs(60, 300));
        history.push(died(victim.c.label));
        victim.c.kill("SIGKILL");
        expect(await victim.c.exited).toMatchObject({ signal: "SIGKILL" });
        kills++;
        fleet.start(victim.slot);
      }
      await producing;

      await waitFor("every job to finish", async () => (await finished(t, QUEUE)) === JOBS, timeoutMs(90, 600), 200);
      await expectSettled(t.db, QUEUE, JOBS);
      expect((await fleet.stop()).map((e) => e.code)).toEqual(new Array(WORKERS).fill(0));

      // Every job done, each run at least once (nothing lost) and no more than its attempts.
      const notDone = await count(t, `SELECT count(*) AS n FROM {all} WHERE queue = $1 AND status <> 'done'`, [QUEUE]);
      expect(notDone).toBe(0);
      const runs = await t.sql<{ job_id: number | string; n: number | string; attempts: number | string }>(
        `SELECT j.id AS job_id, count(e.job_id) AS n, j.attempts FROM {all as j} LEFT JOIN ${effects} e ON e.job_id = j.id WHERE j.queue = $1 GROUP BY j.id, j.attempts`,
        [QUEUE],
      );
      expect(runs).toHaveLength(JOBS);
      expect(runs.filter((r) => Number(r.n) < 1 || Number(r.n) > Number(r.attempts))).toEqual([]);

      // Per key: every run of a job began after the key's previous job completed (compared by the database clock).
      const chain = [...ids.values()].flatMap((keyIds) => {
        const sorted = [...keyIds].sort((a, b) => a - b);
        return sorted.slice(1).map((id, i) => [id, sorted[i]!]);
      });
      for (let from = 0; from < chain.length; from += 200) {
        const some = chain.slice(from, from + 200);
        await t.sql(`INSERT INTO ${pairs} (job_id, previous_id) VALUES ${some.map((_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(", ")}`, some.flat());
      }
      const early = await t.sql<{ job_id: number | string; previous_id: number | string }>(
        `SELECT x.job_id, x.previous_id FROM ${pairs} x JOIN ${effects} e ON e.job_id = x.job_id JOIN {all as p} ON p.id = x.previous_id
         WHERE p.finished_at IS NULL OR e.at < p.finished_at`,
      );
      expect(early).toEqual([]);
      // The chain the enqueues wrote is that same order: each job's one dependency, where it had one, is its predecessor.
      const edges = await t.sql<{ job_id: number | string; depends_on_id: number | string }>(
        `SELECT d.job_id, d.depends_on_id FROM ${t.db.dependenciesTable} d JOIN ${pairs} x ON x.job_id = d.job_id WHERE d.depends_on_id <> x.previous_id`,
      );
      expect(edges).toEqual([]);

      const violations = checkHistory([...history, ...historyOf(fleet.all)], await finalJobs((sql) => t.db.executor.query(sql), allJobs(t.db), QUEUE));
      expect(violations, describeViolations(violations)).toEqual([]);
      const rerun = await count(t, `SELECT count(*) AS n FROM {all} WHERE queue = $1 AND attempts > 1`, [QUEUE]);
      const waited = await count(t, `SELECT count(*) AS n FROM ${pairs} x JOIN ${t.db.dependenciesTable} d ON d.job_id = x.job_id`);
      expect(rerun).toBeGreaterThan(0);
      console.info(
        `[reliability] ${backend.name}: ${JOBS} sequenced jobs over ${KEYS} keys, ${kills} kills, ${rerun} jobs ran more than once, ` +
          `${waited} enqueued behind an unfinished job, ${((Date.now() - began) / 1000).toFixed(1)} s${LONG ? " (long)" : ""}`,
      );
    },
    timeoutMs(120, 900),
  );
});
