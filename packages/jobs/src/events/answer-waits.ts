import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { stepsTable } from "../run/step-store.js";
import { eventTables } from "./event-lock.js";

/** A waiting job just answered: what a wake-up of its queue needs. */
export interface AnsweredWait {
  id: number;
  queue: string;
}

/** Which waits to answer: a condition on the wait row `w`, with its parameters (from `$1`). */
export interface WaitSelection {
  where: string;
  params: unknown[];
  /** Take the waits other transactions hold instead of waiting for them (the timeout sweep). */
  skipLocked?: boolean;
  limit?: number;
}

/**
 * Answers the selected waits of jobs still `waiting`: saves each wait's step with `result`
 * (JSON text, or null), puts the job back to `pending`, due now (the wake), and deletes the
 * waits, the selected waits of jobs no longer waiting (cancelled meanwhile) included. The jobs'
 * rows are locked first, so an event, a timeout and a cancel that meet answer a job once: the
 * one that comes second finds it no longer waiting.
 */
export async function answerWaits(db: JobsDatabase, tx: Executor, selection: WaitSelection, result: string | null): Promise<AnsweredWait[]> {
  const { waits } = eventTables(db);
  const lock = db.dialect === "sqlite" ? "" : db.dialect === "postgres" ? " FOR UPDATE OF j" : " FOR UPDATE";
  const { rows } = await tx.query<{ job_id: unknown; queue: string }>(
    `SELECT w.job_id, j.queue FROM ${waits} AS w JOIN ${db.table} AS j ON j.id = w.job_id AND j.status = 'waiting'
     WHERE ${selection.where} ORDER BY w.job_id${selection.limit === undefined ? "" : ` LIMIT ${selection.limit}`}${lock}${selection.skipLocked && lock ? " SKIP LOCKED" : ""}`,
    selection.params,
  );
  const answered = rows.map((r) => ({ id: Number(r.job_id), queue: String(r.queue) }));
  if (answered.length > 0) {
    const ids = answered.map((a) => a.id);
    const list = db.dialect === "sqlite" ? JSON.stringify(ids) : ids;
    await tx.query(
      `INSERT INTO ${stepsTable(db)} (job_id, name, kind, result, attempt, duration_ms, wake_at, created_at)
       SELECT w.job_id, w.step, CASE WHEN w.child_id IS NULL THEN 'event' ELSE 'invoke' END, ${db.dialect === "postgres" ? "CAST($2 AS text)" : "$2"}, j.attempts, NULL, NULL, ${db.sql.now}
       FROM ${waits} AS w JOIN ${db.table} AS j ON j.id = w.job_id WHERE ${db.sql.inList("w.job_id", "$1")}`,
      [list, result],
    );
    // The wake: due now, with no attempt used (the wait gave its attempt back).
    await tx.query(
      `UPDATE ${db.table} SET status = 'pending', run_at = ${db.sql.now}, updated_at = ${db.sql.now}
       WHERE ${db.sql.inList("id", "$1")} AND status = 'waiting'`,
      [list],
    );
    await tx.query(`DELETE FROM ${waits} WHERE ${db.sql.inList("job_id", "$1")}`, [list]);
  }
  return answered;
}

/** Wakes the workers of this process that poll the answered jobs' queues (SQLite); PostgreSQL's wake-ups are sent by pg_notify. */
export async function notifyAnswered(db: JobsDatabase, tx: Executor, answered: readonly AnsweredWait[]): Promise<void> {
  const queues = [...new Set(answered.map((a) => a.queue))];
  if (queues.length === 0) return;
  if (db.dialect === "postgres") {
    // Delivered at commit, and not at all on a rollback.
    await tx.query(`SELECT count(pg_notify($1, q)) AS n FROM unnest($2::text[]) AS q`, [db.channel, queues]);
    return;
  }
  for (const queue of queues) db.executor.notify?.(db.channel, queue);
}
