import { openJson, openText } from "../base/payload-codec.js";
import type { TaskName } from "../base/types.js";
import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { settleEndedIds } from "../dependencies/flow-release.js";
import { insertInTransaction } from "../enqueue/enqueue.js";
import { prepareJob, type EnqueueSettings } from "../enqueue/new-job.js";
import { whileEnding } from "./ended.js";

/**
 * What a dead letter carries: the job that failed for good, as it was when it failed. `error` is
 * its last error (also the letter's own `lastError`, so lists show it), `attempts` the runs it
 * used of `maxAttempts`.
 */
export interface DeadLetterPayload {
  id: number;
  queue: string;
  task: string;
  payload: unknown;
  tenant: string | null;
  attempts: number;
  maxAttempts: number;
  error: string | null;
}

/**
 * The task of every dead letter. Not the failed job's task: a worker of the dead-letter queue
 * would run the very handler that failed, with a payload that is not its own. A handler for
 * this task (alert, archive, re-enqueue) receives a `DeadLetterPayload`.
 */
export const DEAD_LETTER_TASK = "forge.dead_letter" as TaskName<DeadLetterPayload>;

type FailedRow = {
  id: number | string;
  queue: string;
  task: string;
  payload: unknown;
  tenant: string | null;
  attempts: number | string;
  max_attempts: number | string;
  last_error: string | null;
  dead_letter: string;
};

/** A letter is never refused for its size: the failure that writes it must settle. */
function unbounded(db: JobsDatabase): EnqueueSettings {
  return { ...db.settings, maxPayloadBytes: Number.MAX_SAFE_INTEGER };
}

/** A stored payload as the job's handler saw it: opened with the database's payloadCodec when sealed. */
function storedPayload(db: JobsDatabase, value: unknown): unknown {
  return openJson(db.sql.payloadCodec, db.sql.readJson(value));
}

/**
 * For the writes that fail jobs for good (a handler's last failure, a lost worker's job with no
 * attempt left), in their transaction and before the jobs move into history: each of `ids` that
 * failed and has a dead-letter queue gets its letter there, a `DEAD_LETTER_TASK` job that has
 * no dead-letter queue of its own (a letter that fails stays failed). Returns the letters' ids.
 */
export async function sendDeadLetters(db: JobsDatabase, tx: Executor, ids: readonly number[]): Promise<number[]> {
  if (ids.length === 0) return [];
  const { rows } = await tx.query<FailedRow>(
    `SELECT id, queue, task, payload, tenant, attempts, max_attempts, last_error, dead_letter FROM ${db.table}
     WHERE ${db.sql.inList("id", "$1")} AND status = 'failed' AND dead_letter IS NOT NULL ORDER BY id`,
    [ids],
  );
  if (rows.length === 0) return [];
  const settings = unbounded(db);
  const letters = rows.map((r) => {
    const letter: DeadLetterPayload = {
      id: Number(r.id),
      queue: r.queue,
      task: r.task,
      payload: storedPayload(db, r.payload),
      tenant: r.tenant ?? null,
      attempts: Number(r.attempts),
      maxAttempts: Number(r.max_attempts),
      error: r.last_error === null ? null : openText(db.sql.payloadCodec, r.last_error),
    };
    const options = { queue: r.dead_letter, deadLetter: null, ...(r.tenant === null ? {} : { tenant: r.tenant }) };
    return prepareJob(DEAD_LETTER_TASK, letter, options, r.dead_letter, settings, null);
  });
  const sent = await insertInTransaction(db, tx, letters);
  // The error on the letter's row as well, as stored (sealed when the original's is): the job list shows it there.
  for (const [i, id] of sent.entries()) await tx.query(`UPDATE ${db.table} SET last_error = $2 WHERE id = $1`, [id, rows[i]?.last_error ?? null]);
  return sent;
}

/**
 * Sends a pending dead letter's job back to its queue: a new job of its task and payload, with
 * its maxAttempts, tenant and this dead-letter queue; the letter is cancelled (kept in history),
 * in the same transaction. False when `id` is not a pending letter (of `tenant`, when given).
 * The failed original stays as it was.
 */
export async function redriveDeadLetter(db: JobsDatabase, id: number, tenant: string | null): Promise<boolean> {
  return whileEnding(db, () =>
    db.executor.transaction(async (tx) => {
      const { rows } = await tx.query<{ queue: string; payload: unknown }>(
        `SELECT queue, payload FROM ${db.table} WHERE id = $1 AND task = $2 AND status = 'pending'${tenant === null ? "" : " AND tenant = $3"}${db.dialect === "sqlite" ? "" : " FOR UPDATE"}`,
        tenant === null ? [id, DEAD_LETTER_TASK] : [id, DEAD_LETTER_TASK, tenant],
      );
      const row = rows[0];
      if (!row) return false;
      const letter = storedPayload(db, row.payload) as DeadLetterPayload;
      const options = {
        queue: letter.queue,
        maxAttempts: letter.maxAttempts,
        deadLetter: row.queue,
        ...(letter.tenant === null ? {} : { tenant: letter.tenant }),
      };
      await insertInTransaction(db, tx, [prepareJob(letter.task, letter.payload, options, letter.queue, unbounded(db), null)]);
      await tx.query(`UPDATE ${db.table} SET status = 'cancelled', finished_at = ${db.sql.now}, updated_at = ${db.sql.now} WHERE id = $1`, [id]);
      await settleEndedIds(db, tx, [id], "cancelled");
      return true;
    }),
  );
}
