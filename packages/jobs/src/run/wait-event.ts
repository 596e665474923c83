import type { JobsDatabase } from "../core/database.js";
import { Fenced, runGivenBackSql } from "./run-given-back.js";
import type { Executor } from "../db/executor.js";
import { eventTables, lockEvent, type EventMatch } from "../events/event-lock.js";
import { saveStep } from "./step-store.js";

/** What `ctx.waitForEvent` waits for: the event, its key and the job's tenant ('' for none), and for how long at most. */
export interface EventWait extends EventMatch {
  kind: "event";
  /** Seconds from the wait's start by the database clock; null waits until the event comes. */
  timeout: number | null;
}

/**
 * The event delivered to a wait of job `jobId`: the earliest of its name, key and tenant sent at
 * or after the job was created (both by the database clock), so an event sent between the
 * enqueue and the wait is not missed. Undefined when there is none yet.
 */
export async function findEvent(db: JobsDatabase, executor: Executor, jobId: number, match: EventMatch): Promise<{ data: string | null } | undefined> {
  const { rows } = await executor.query<{ data: string | null }>(
    `SELECT e.data FROM ${eventTables(db).events} AS e
     WHERE e.name = $1 AND e.event_key = $2 AND e.tenant = $3 AND e.created_at >= (SELECT j.created_at FROM ${db.table} AS j WHERE j.id = $4)
     ORDER BY e.created_at, e.id LIMIT 1`,
    [match.event, match.key, match.tenant, jobId],
  );
  const [row] = rows;
  return row === undefined ? undefined : { data: row.data === null ? null : String(row.data) };
}

/** The run's job back to pending, due now, its attempt given back: what it waits for came as the run ended. */
export function requeueSql(db: JobsDatabase): string {
  return runGivenBackSql(db, `status = 'pending', run_at = ${db.sql.now}`);
}

/** The run's job to `waiting`, its attempt given back: it holds no slot until an event or its timeout. */
function waitSql(db: JobsDatabase): string {
  return runGivenBackSql(db, "status = 'waiting'");
}

/**
 * Ends a run that waits for an event, in one transaction under the event's lock (so that a
 * sendEvent either committed before, and is found here, or comes after and finds the wait):
 * an event already there is saved as the step's answer and the job is due again now; else the
 * wait is recorded and the job is `waiting`. Either way the attempt this run used is given back.
 * Fenced by the claim token: false when the job was no longer this run's, nothing written.
 */
export async function writeEventWait(db: JobsDatabase, job: { id: number; token: string }, step: string, wait: EventWait): Promise<boolean> {
  try {
    return await db.executor.transaction(async (tx) => {
      await lockEvent(db, tx, wait);
      const found = await findEvent(db, tx, job.id, wait);
      if (found) {
        if (!(await saveStep(db, tx, job, { name: step, kind: "event", result: found.data ?? "null", durationMs: null, wake: null }))) throw new Fenced();
        if ((await tx.query(requeueSql(db), [job.id, job.token])).rowCount === 0) throw new Fenced();
        return true;
      }
      if ((await tx.query(waitSql(db), [job.id, job.token])).rowCount === 0) throw new Fenced();
      const { waits } = eventTables(db);
      // A wait left by a run that was cancelled and retried is replaced.
      await tx.query(`DELETE FROM ${waits} WHERE job_id = $1`, [job.id]);
      const params: unknown[] = [job.id, step, wait.event, wait.key, wait.tenant];
      if (wait.timeout !== null) params.push(wait.timeout);
      await tx.query(
        `INSERT INTO ${waits} (job_id, step, event, event_key, tenant, child_id, timeout_at, created_at)
         VALUES ($1, $2, $3, $4, $5, NULL, ${wait.timeout === null ? "NULL" : db.sql.nowPlus("$6")}, ${db.sql.now})`,
        params,
      );
      return true;
    });
  } catch (error) {
    if (error instanceof Fenced) return false;
    throw error;
  }
}
