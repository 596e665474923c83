import { JobsDatabase, reclaim } from "../../../src/index.js";
import { waitFor, type TestDatabase } from "../../helpers/backends.js";
import { enqueued, reclaimedBy, type HistoryEvent } from "./history.js";
import { count, sleep } from "./queue.js";

/** What the takeover soaks' driver needs (takeover.test.ts, steps-takeover.test.ts). */
export interface TakeoverDrive {
  t: TestDatabase;
  queue: string;
  /** The ledger table: one `reclaim` row (job, attempt) per job each reclaim took, in its transaction. */
  ledger: string;
  /** How many takeovers of started runs to force. */
  takeovers: number;
  /** "job:attempt" of every run whose handler began: a reclaim of one of those is a takeover. */
  started: ReadonlySet<string>;
  /** Where the enqueues and the reclaims are recorded. */
  history: HistoryEvent[];
  /** Enqueues `n` jobs of the test's task in `queue`; their ids. */
  enqueue: (n: number) => Promise<number[]>;
  /** Jobs enqueued at first; `refill` more whenever fewer than `refill` are left open. */
  first: number;
  refill: number;
}

/**
 * Forced takeovers under running handlers: `reclaim({ lease: 0 })` every 10–50 ms, each in a
 * transaction that also writes a ledger row per job it took, so that a write of that attempt
 * accepted after the takeover would have a larger `seq` than its `reclaim` row. Keeps jobs
 * coming until enough started runs were taken over, then waits for every job to be done.
 */
export async function driveTakeovers(drive: TakeoverDrive): Promise<{ takeovers: number; reclaimed: number; total: number }> {
  const { t, queue, ledger, history } = drive;
  const more = async (n: number) => history.push(...(await drive.enqueue(n)).map((id) => enqueued(id, "test")));
  let total = drive.first;
  await more(total);
  let takeovers = 0;
  let reclaimed = 0;
  while (takeovers < drive.takeovers) {
    await sleep(10 + Math.random() * 40);
    const taken = await t.db.executor.transaction(async (tx) => {
      const jobs = await reclaim({ db: new JobsDatabase(tx, t.db.settings), lease: 0, queue });
      for (const job of jobs) await tx.query(`INSERT INTO ${ledger} (job_id, attempt, kind) VALUES ($1, $2, 'reclaim')`, [job.id, job.attempts]);
      return jobs;
    });
    history.push(...reclaimedBy("driver", taken));
    reclaimed += taken.length;
    takeovers += taken.filter((j) => drive.started.has(`${j.id}:${j.attempts}`)).length;
    const open = await count(t, `SELECT count(*) AS n FROM {jobs} WHERE queue = $1 AND status IN ('pending', 'running')`, [queue]);
    if (open < drive.refill) {
      await more(drive.refill);
      total += drive.refill;
    }
  }
  await waitFor(
    "every job done once the takeovers stop",
    async () => (await count(t, `SELECT count(*) AS n FROM {all} WHERE queue = $1 AND status = 'done'`, [queue])) === total,
    60_000,
    50,
  );
  return { takeovers, reclaimed, total };
}
