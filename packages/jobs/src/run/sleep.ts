import type { JobsDatabase } from "../core/database.js";
import { Fenced, runGivenBackSql } from "./run-given-back.js";
import { dueAfter } from "./due.js";
import { saveStep, stepsTable, type Wake } from "./step-store.js";
import { writeEventWait, type EventWait } from "./wait-event.js";
import { writeChildWait } from "./wait-child.js";
import type { ChildWait } from "./invoke.js";

/**
 * The longest durable sleep, in seconds (366 days). Unlike a snooze (a retry "not now"), a
 * sleep is part of a job's plan and may last weeks; past a year it is more likely a unit
 * mistake (milliseconds given as seconds), refused with a clear error.
 */
export const MAX_SLEEP_SECONDS = 366 * 24 * 3600;

/** A run's request to end and come back later: its sleep step, and the wake time to save when the step is new. */
export interface SleepRequest {
  name: string;
  /** Null when the sleep was saved by an earlier run (woken before its time): its saved wake time stands. */
  wake: Wake | null;
  /** Set when the run ends to wait for an event or a child job rather than for a time (`wake` is then null). */
  wait?: EventWait | ChildWait;
}

/**
 * What `ctx.sleep` throws to end the run: the queue reads the run's sleep from its context, so
 * a handler that catches this and returns still sleeps. Not an error of the job.
 */
export class JobSleep extends Error {
  override readonly name = "JobSleep";

  constructor(readonly request: SleepRequest) {
    super(
      `${request.wait ? `waiting for ${request.wait.kind === "event" ? "an event" : `child job ${request.wait.childId}`}` : "sleeping"} (step ${JSON.stringify(request.name)}); the run ends here and the job runs again from the top when it wakes`,
    );
  }
}

/** The job row is already locked by the fenced step insert of the same transaction, or fenced here. */
function sleepSql(db: JobsDatabase): string {
  const wakeAt = `(SELECT s.wake_at FROM ${stepsTable(db)} AS s WHERE s.job_id = $1 AND s.name = $3)`;
  return runGivenBackSql(db, `status = 'pending', due = ${dueAfter(db, wakeAt)}, run_at = ${wakeAt}`);
}

/**
 * Ends a run that sleeps: saves its sleep step (when new) and puts the job back to pending, due
 * at the step's wake time, the attempt this run used given back; one transaction, fenced by the
 * claim token. `snoozes` is unchanged: a sleep is part of the job's plan, not a "not now", so it
 * does not count toward `maxSnoozes`. False when the job was no longer this run's.
 */
export async function writeSleep(db: JobsDatabase, job: { id: number; token: string }, request: SleepRequest): Promise<boolean> {
  if (request.wait)
    return request.wait.kind === "event" ? writeEventWait(db, job, request.name, request.wait) : writeChildWait(db, job, request.name, request.wait);
  try {
    return await db.executor.transaction(async (tx) => {
      if (request.wake !== null) {
        const saved = await saveStep(db, tx, job, { name: request.name, kind: "sleep", result: null, durationMs: null, wake: request.wake });
        if (!saved) throw new Fenced();
      }
      if ((await tx.query(sleepSql(db), [job.id, job.token, request.name])).rowCount === 0) throw new Fenced();
      return true;
    });
  } catch (error) {
    if (error instanceof Fenced) return false;
    throw error;
  }
}
