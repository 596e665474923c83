import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { qualified } from "../db/identifiers.js";
import { toDate } from "../core/job-row.js";
import { STEPS_TABLE } from "../migrations/steps.js";
import { timestampParam } from "../schedules/schedule-rows.js";

/** What a durable step is: `ctx.step`'s work, `ctx.sleep`'s wake time, `ctx.waitForEvent`'s event data, `ctx.invoke`'s child. */
export type StepKind = "step" | "sleep" | "event" | "invoke";

const KINDS: readonly string[] = ["step", "sleep", "event", "invoke"] satisfies StepKind[];

/** One saved step, as a later run of its job reads it. */
export interface SavedStep {
  kind: StepKind;
  /** The step's JSON text, or null when its function returned undefined (and for a sleep). */
  result: string | null;
  /** A sleep's wake time, by the database clock; null for a step. */
  wakeAt: Date | null;
  /** Whether `wakeAt` had passed when the steps were read (the database clock decides). */
  due: boolean;
}

const tables = new WeakMap<JobsDatabase, string>();

/** The quoted, qualified jobs_steps table of `db`. */
export function stepsTable(db: JobsDatabase): string {
  let table = tables.get(db);
  if (table === undefined) {
    table = qualified(db.dialect, db.schema, STEPS_TABLE);
    tables.set(db, table);
  }
  return table;
}

/** Every step a job saved, by name: read once per run, at its first step. */
export async function loadSteps(db: JobsDatabase, jobId: number): Promise<Map<string, SavedStep>> {
  const { rows } = await db.executor.query<{ name: string; kind: string; result: string | null; wake_at: unknown; due: unknown }>(
    `SELECT name, kind, result, wake_at, CASE WHEN wake_at IS NULL OR wake_at <= ${db.sql.now} THEN 1 ELSE 0 END AS due
     FROM ${stepsTable(db)} WHERE job_id = $1`,
    [jobId],
  );
  const saved = new Map<string, SavedStep>();
  for (const row of rows) {
    saved.set(String(row.name), {
      kind: (KINDS.includes(row.kind) ? row.kind : "step") as StepKind,
      result: row.result === null ? null : String(row.result),
      wakeAt: row.wake_at === null || row.wake_at === undefined ? null : toDate(row.wake_at),
      due: Number(row.due) === 1,
    });
  }
  return saved;
}

/** When a sleep wakes: `seconds` from now by the database clock, or at a given instant. */
export type Wake = { in: number } | { at: Date };

/** A step to save: its name, kind, JSON text (or null), how long it ran, and a sleep's wake time. */
export interface StepRow {
  name: string;
  kind: StepKind;
  result: string | null;
  durationMs: number | null;
  wake: Wake | null;
}

/**
 * Saves one step in one statement, fenced by the claim token: the row is written only while
 * `token` still holds the running job, and that job row is locked (FOR UPDATE) until the
 * caller's transaction commits, so a reclaim cannot take the job between the check and the
 * commit (as a checkpoint's fenced UPDATE does). SQLite's transactions hold its one write lock:
 * nothing to lock. Returns false when the job was no longer this run's: nothing was written.
 * `attempt` is the job's own: the attempt that saved the step — counted as the start write
 * will count it, since a handler may run (PostgreSQL) before its start write commits.
 */
export async function saveStep(db: JobsDatabase, executor: Executor, job: { id: number; token: string }, step: StepRow): Promise<boolean> {
  const params: unknown[] = [job.id, job.token, step.name, step.kind, step.result, step.durationMs];
  if (step.wake !== null) params.push("in" in step.wake ? step.wake.in : timestampParam(db, step.wake.at));
  const { rowCount } = await executor.query(
    `INSERT INTO ${stepsTable(db)} (job_id, name, kind, result, attempt, duration_ms, wake_at, created_at)
     SELECT id, $3, $4, $5, attempts + CASE WHEN started_at IS NULL THEN 1 ELSE 0 END, ${typed(db, "$6", "INTEGER")}, ${wakeOf(db, step.wake)}, ${db.sql.now}
     FROM ${db.table} WHERE id = $1 AND claim_token = $2 AND status = 'running'${db.dialect === "sqlite" ? "" : " FOR UPDATE"}`,
    params,
  );
  return rowCount > 0;
}

/** `$7`, a sleep's wake time: seconds from the database's now, or an instant. */
function wakeOf(db: JobsDatabase, wake: Wake | null): string {
  if (wake === null) return "NULL";
  return "in" in wake ? db.sql.nowPlus("$7") : typed(db, "$7", "TIMESTAMPTZ");
}

/** A parameter typed where PostgreSQL cannot infer it from the column (the select list of an INSERT … SELECT). */
function typed(db: JobsDatabase, parameter: string, type: string): string {
  return db.dialect === "postgres" ? `CAST(${parameter} AS ${type})` : parameter;
}
