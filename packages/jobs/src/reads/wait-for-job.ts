import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import type { DbLike } from "../core/options.js";
import type { Job } from "../base/types.js";
import { JobError } from "../base/errors.js";
import { checkJobId, checkKnownOptions, checkSeconds, checkTenant, describe } from "../base/validate.js";
import { listenEnded } from "../run/end-wakeups.js";
import { getJob } from "./status.js";

export interface WaitForJobOptions {
  /** Seconds to wait at most; past it, a JobWaitTimeoutError. Default: no limit. */
  timeout?: number;
  /** Stops waiting: the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Only this tenant's job: another tenant's job is "not found" (a JobError). */
  tenant?: string;
  db?: DbLike;
}

/** waitForJob's `timeout` passed with the job still unfinished; `job` is how it was last read. */
export class JobWaitTimeoutError extends Error {
  constructor(
    readonly jobId: number,
    readonly job: Job,
  ) {
    super(`job ${jobId} did not finish within the timeout (it is ${job.status}); wait again, or give waitForJob a longer timeout`);
    this.name = "JobWaitTimeoutError";
  }
}

const OPTION_KEYS = ["timeout", "signal", "tenant", "db"] as const;
const ENDED = new Set(["done", "failed", "cancelled"]);

/**
 * Reads between wake-ups, in case one is missed (a lost LISTEN connection, a job ended by
 * another process on SQLite or MariaDB, a read replica behind): on PostgreSQL the server pushes,
 * so the fallback is slow; elsewhere it starts fast and backs off.
 */
const POLL_MS = { postgres: { first: 5_000, max: 5_000 }, other: { first: 500, max: 5_000 } };

/**
 * Resolves with the job once it has ended (done, failed or cancelled), wherever it is kept.
 * PostgreSQL: flags the job `awaited` and listens for the trigger's NOTIFY (only awaited jobs
 * notify); SQLite and MariaDB: woken by ending writes of this process, and polling.
 */
export async function waitForJob(id: number, options: WaitForJobOptions = {}): Promise<Job> {
  checkKnownOptions(options, OPTION_KEYS, "waitForJob");
  checkJobId(id);
  const timeoutMs = options.timeout === undefined ? null : checkSeconds(options.timeout, "timeout") * 1000;
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new JobError(`signal must be an AbortSignal, got ${describe(signal)}`, "signal");
  const tenant = checkTenant(options.tenant, "tenant", "every tenant's jobs");
  const db = resolveDb(options.db);
  signal?.throwIfAborted();
  const deadline = timeoutMs === null ? null : Date.now() + timeoutMs;
  const wake = new Wake();
  const listener = await listenEnded(db, (payload) => {
    if (payload === "" || payload === String(id)) wake.wake();
  });
  try {
    if (db.dialect === "postgres") await flagAwaited(db, id, tenant);
    const poll = db.dialect === "postgres" ? POLL_MS.postgres : POLL_MS.other;
    for (let pollMs = poll.first; ; pollMs = Math.min(poll.max, pollMs * 2)) {
      const job = await getJob(id, { db, ...(tenant === null ? {} : { tenant }) });
      if (!job) throw new JobError(`job ${id} not found${tenant === null ? "" : ` for tenant ${JSON.stringify(tenant)}`}`, "id");
      if (ENDED.has(job.status)) return job;
      const left = deadline === null ? pollMs : deadline - Date.now();
      if (left <= 0) throw new JobWaitTimeoutError(id, job);
      await wake.sleep(Math.min(pollMs, left), signal);
    }
  } finally {
    await listener.close();
  }
}

/**
 * Asks the ending write to notify: the trigger of migration 23 fires for flagged rows only. A
 * job no longer live (ended, or never there) matches nothing, and the read that follows says so.
 */
async function flagAwaited(db: JobsDatabase, id: number, tenant: string | null): Promise<void> {
  await db.executor.query(
    `UPDATE ${db.table} SET awaited = true WHERE id = $1 AND NOT awaited${tenant === null ? "" : " AND tenant = $2"}`,
    tenant === null ? [id] : [id, tenant],
  );
}

/** A sleep cut short by a wake-up (kept if it came while awake) or rejected by an abort. */
class Wake {
  private woken = false;
  private resolve: (() => void) | null = null;

  wake(): void {
    if (this.resolve) this.resolve();
    else this.woken = true;
  }

  sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", aborted);
        this.resolve = null;
      };
      const aborted = () => {
        done();
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        done();
        resolve();
      }, ms);
      this.resolve = () => {
        done();
        resolve();
      };
      signal?.addEventListener("abort", aborted, { once: true });
    });
  }
}
