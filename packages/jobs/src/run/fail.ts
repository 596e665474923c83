import type { JobsDatabase } from "../core/database.js";
import { dueAfter } from "./due.js";
import { settleEndedIds } from "../dependencies/flow-release.js";
import { whileEnding } from "./ended.js";
import { recordAttempts } from "./attempts.js";
import { sendDeadLetters } from "./dead-letter.js";
import { sealText } from "../base/payload-codec.js";

export type FailureOutcome =
  /** Back to pending, to run again after `delay` seconds. */
  | { kind: "retry"; delay: number }
  /** No attempt left, or the error said `retryable: false`. */
  | { kind: "fail" }
  /** Shutdown: back to pending now, and the attempt it used (if it had started) is given back. */
  | { kind: "release" }
  /** The handler snoozed: back to pending after `delay` seconds, its attempt given back, `snoozes` + 1. */
  | { kind: "snooze"; delay: number };

/**
 * One text on every backend, the clock being the dialect's. MariaDB assigns left to right,
 * later SETs seeing earlier ones: none here reads a column that an earlier SET changed.
 */
function failSql(db: JobsDatabase): string {
  const now = db.sql.now;
  return `
    UPDATE ${db.table}
    SET status = CASE WHEN $3 = 'fail' THEN 'failed' ELSE 'pending' END,
        attempts = CASE WHEN $3 IN ('release', 'snooze') AND started_at IS NOT NULL THEN attempts - 1 ELSE attempts END,
        snoozes = CASE WHEN $3 = 'snooze' THEN snoozes + 1 ELSE snoozes END,
        due = CASE WHEN $3 = 'fail' THEN due ELSE ${dueAfter(db, db.sql.nowPlus("$4"))} END,
        run_at = CASE WHEN $3 = 'fail' THEN run_at ELSE ${db.sql.nowPlus("$4")} END,
        last_error = COALESCE($5, last_error),
        finished_at = CASE WHEN $3 = 'fail' THEN ${now} END,
        locked_until = NULL, claim_token = NULL, updated_at = ${now}
    WHERE id = $1 AND claim_token = $2 AND status = 'running'`;
}

/** Longest `last_error` kept, in UTF-16 units: the head of a message says what went wrong; megabytes of it only strain the write. */
export const MAX_ERROR_LENGTH = 64 * 1024;
// eslint-disable-next-line no-control-regex -- U+0000 is one of the characters no backend stores
const UNSTORABLE_CHARACTERS = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Any text a handler's error can hold, as every backend stores it: cut to MAX_ERROR_LENGTH,
 * U+0000 and lone surrogates (which PostgreSQL refuses, failing the very write that records
 * the failure) as U+FFFD.
 */
export function storableErrorText(text: string): string {
  let kept = text;
  if (kept.length > MAX_ERROR_LENGTH) {
    const cut = MAX_ERROR_LENGTH - 40;
    kept = `${kept.slice(0, cut)}… (${kept.length - cut} more characters)`;
  }
  return kept.replace(UNSTORABLE_CHARACTERS, "\uFFFD");
}

/**
 * Records a run that did not succeed. Fenced by the claim token: returns false when the job
 * was no longer ours, and then nothing was written.
 */
export async function failJob(db: JobsDatabase, id: number, token: string, outcome: FailureOutcome, error: string | null): Promise<boolean> {
  const delay = outcome.kind === "retry" || outcome.kind === "snooze" ? outcome.delay : 0;
  const params = [id, token, outcome.kind, delay, error === null ? null : sealText(db.settings.payloadCodec, storableErrorText(error))];
  // A retry ends an attempt that is followed by another: recorded with the write that reschedules it.
  if (outcome.kind === "retry") {
    return db.executor.transaction(async (tx) => {
      if ((await tx.query(failSql(db), params, "fail")).rowCount === 0) return false;
      await recordAttempts(db, tx, [id]);
      return true;
    });
  }
  if (outcome.kind !== "fail") return (await db.executor.query(failSql(db), params, "fail")).rowCount > 0;
  // Failed for good: its dependents and batch learn of it, and it moves into history, in the same transaction.
  return whileEnding(db, () =>
    db.executor.transaction(async (tx) => {
      if ((await tx.query(failSql(db), params, "fail")).rowCount === 0) return false;
      await sendDeadLetters(db, tx, [id]);
      await settleEndedIds(db, tx, [id], "failed");
      return true;
    }),
  );
}

/** How often a running job has snoozed and may snooze; null when `token` no longer holds it. */
export async function readSnoozes(db: JobsDatabase, id: number, token: string): Promise<{ snoozes: number; maxSnoozes: number } | null> {
  const { rows } = await db.executor.query<{ snoozes: number | string; max_snoozes: number | string }>(
    `SELECT snoozes, max_snoozes FROM ${db.table} WHERE id = $1 AND claim_token = $2 AND status = 'running'`,
    [id, token],
  );
  const row = rows[0];
  return row ? { snoozes: Number(row.snoozes), maxSnoozes: Number(row.max_snoozes) } : null;
}
