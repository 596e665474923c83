import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { toDate } from "../core/job-row.js";
import { eachStore, storesOf } from "../core/stores.js";
import { READ_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import type { ReadOptions } from "../core/options.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import { checkJobId, checkTenant } from "../base/validate.js";
import type { JobStatus, JobStep, JobWaitingFor } from "../base/types.js";

export type { JobStep, JobWaitingFor } from "../base/types.js";
import { stepsTable } from "../run/step-store.js";
import { isMissingTable } from "../flow/flow-overview.js";
import { eventTables } from "../events/event-lock.js";

/**
 * A job's steps, in the order they were saved (by the database clock; within one tick of it — a
 * millisecond on SQLite — a sleep last, as it ended its run, and steps by name), and what the
 * job waits for now.
 */
export interface JobSteps {
  steps: JobStep[];
  /** What the job waits for now (see JobWaitingFor), or null when it waits for nothing of its own. */
  waitingFor: JobWaitingFor | null;
}

/** The saved JSON's size in bytes, without reading it. */
const BYTES: PerDialect<string> = {
  postgres: "COALESCE(octet_length(result), 0)",
  sqlite: "COALESCE(length(CAST(result AS BLOB)), 0)",
  mysql: "COALESCE(OCTET_LENGTH(result), 0)",
};

interface StepRow {
  name: string;
  kind: string;
  attempt: number | string;
  duration_ms: number | string | null;
  result_bytes: number | string;
  wake_at: unknown;
  ahead: number | string;
  created_at: unknown;
}

/** A job's steps (see JobSteps), or null when the job does not exist (or is another tenant's). Read-only. */
export async function jobSteps(db: JobsDatabase, id: number, tenant: string | null = null): Promise<JobSteps | null> {
  const byId = (table: string) => `SELECT status FROM ${table} WHERE id = $1${tenant === null ? "" : " AND tenant = $2"}`;
  const job = (await db.executor.query<{ status: JobStatus }>(eachStore(byId, storesOf(db)), tenant === null ? [id] : [id, tenant])).rows[0];
  return job ? readSteps(db, id, job.status) : null;
}

/** The steps of job `id`, whose status is `status`, and what it waits for now (see JobSteps): one read of its steps, one of its wait when `waiting`. */
export async function readSteps(db: JobsDatabase, id: number, status: JobStatus): Promise<JobSteps> {
  const { rows } = await db.executor
    .query<StepRow>(
      `SELECT name, kind, attempt, duration_ms, ${forDialect(BYTES, db.dialect, "getJobSteps")} AS result_bytes, wake_at,
              CASE WHEN wake_at > ${db.sql.now} THEN 1 ELSE 0 END AS ahead, created_at
       FROM ${stepsTable(db)} WHERE job_id = $1 ORDER BY created_at, CASE WHEN kind = 'sleep' THEN 1 ELSE 0 END, name`,
      [id],
    )
    // Before migration 18 no step was saved.
    .catch((error: unknown) => {
      if (isMissingTable(error)) return { rows: [] as StepRow[] };
      throw error;
    });
  let waitingFor: JobSteps["waitingFor"] = null;
  const steps = rows.map((row): JobStep => {
    const wakeAt = row.wake_at === null || row.wake_at === undefined ? null : toDate(row.wake_at);
    // Only a job back in the queue waits out its sleep: a cancelled one, or one woken by hand, does not.
    const sleeping = row.kind === "sleep" && Number(row.ahead) === 1 && status === "pending";
    if (sleeping) waitingFor = { kind: "sleep", step: row.name, until: wakeAt! };
    return {
      name: row.name,
      kind: (STEP_KINDS.includes(row.kind) ? row.kind : "step") as JobStep["kind"],
      status: sleeping ? "sleeping" : "done",
      attempt: Number(row.attempt),
      durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
      resultBytes: Number(row.result_bytes),
      wakeAt,
      savedAt: toDate(row.created_at),
    };
  });
  if (status === "waiting") waitingFor = await waitOf(db, id);
  return { steps, waitingFor };
}

const STEP_KINDS: readonly string[] = ["step", "sleep", "event", "invoke"] satisfies JobStep["kind"][];

/** The wait a `waiting` job recorded when its run ended (run/wait-event.ts, run/wait-child.ts); null for one waiting on its dependsOn. */
async function waitOf(db: JobsDatabase, id: number): Promise<JobWaitingFor | null> {
  const { rows } = await db.executor
    .query<{ step: string; event: string; event_key: string; child_id: number | string | null; timeout_at: unknown }>(
      `SELECT step, event, event_key, child_id, timeout_at FROM ${eventTables(db).waits} WHERE job_id = $1`,
      [id],
    )
    // Before migration 20 no job waited for an event or a child.
    .catch((error: unknown) => {
      if (isMissingTable(error)) return { rows: [] };
      throw error;
    });
  const [row] = rows;
  if (row === undefined) return null;
  if (row.child_id !== null) return { kind: "child", step: row.step, childId: Number(row.child_id) };
  const until = row.timeout_at === null || row.timeout_at === undefined ? null : toDate(row.timeout_at);
  return { kind: "event", step: row.step, event: row.event, key: row.event_key, until };
}

/**
 * One job's durable steps and what it waits for now (see JobSteps), or null when there is no
 * such job (or it is another tenant's). Steps go with their job (retention). Read-only.
 */
export async function getJobSteps(id: number, options: ReadOptions = {}): Promise<JobSteps | null> {
  checkOptions(options, READ_OPTION_KEYS, "getJobSteps");
  checkJobId(id);
  const tenant = checkTenant(options.tenant, "tenant", "every tenant's jobs");
  return jobSteps(resolveDb(options.db).forReading(), id, tenant);
}
