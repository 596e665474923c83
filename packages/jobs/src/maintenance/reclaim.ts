import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { lockUpdateRead } from "../core/lock-update-read.js";
import { settleEndedIds } from "../dependencies/flow-release.js";
import { sendDeadLetters } from "../run/dead-letter.js";
import { whileEnding } from "../run/ended.js";
import { recordAttempts } from "../run/attempts.js";
import { forDialect, runSql, type PerDialect, type Script } from "../core/sql.js";
import { type ReclaimOptions } from "../core/options.js";
import { RECLAIM_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import type { ReclaimedJob } from "../base/types.js";
import { checkName, checkSeconds } from "../base/validate.js";

export type { ReclaimOptions } from "../core/options.js";

/** A lost worker gave no verdict, and the message must say so, unlike a handler's exception. */
export const WORKER_LOST_PREFIX = "worker lost without a verdict";

interface ReclaimedRow {
  id: number | string;
  queue: string;
  task: string;
  attempts: number;
  status: "pending" | "failed";
}

/**
 * `last_error` of a run its worker lost: the sentence, in the dialect's SQL, from the row's
 * columns (`column` qualifies a name) and the parameter holding WORKER_LOST_PREFIX.
 */
function lostWorkerError(db: JobsDatabase, prefix: string, column: (name: string) => string = (name) => name): string {
  return db.sql.concat([
    prefix,
    "': attempt '",
    column("attempts"),
    "' of '",
    column("max_attempts"),
    "' held by '",
    `COALESCE(${column("locked_by")}, 'an unknown worker')`,
    "' stopped sending heartbeats (last at '",
    db.sql.isoTimestamp(column("heartbeat_at")),
    "'); the handler never reported success or failure'",
  ]);
}

const RECLAIM: PerDialect<(db: JobsDatabase) => string | Script<ReclaimedRow>> = {
  // SKIP LOCKED: five reclaimers at once split the rows instead of reclaiming one twice; a
  // row locked by its worker's heartbeat is skipped and its fresh lease is honoured.
  postgres: (db) => `
    WITH lost AS (
      SELECT id FROM ${db.table}
      WHERE status = 'running'
        AND CASE WHEN $1::float8 IS NULL THEN locked_until < now()
                 ELSE heartbeat_at <= now() - make_interval(secs => $1::float8) END
        AND ($2::text IS NULL OR queue = $2::text)
      FOR UPDATE SKIP LOCKED
    )
    UPDATE ${db.table} AS j
    SET status = CASE WHEN j.started_at IS NULL OR j.attempts < j.max_attempts THEN 'pending' ELSE 'failed' END,
        last_error = CASE WHEN j.started_at IS NULL THEN j.last_error ELSE ${lostWorkerError(db, "$3::text", (name) => `j.${name}`)} END,
        finished_at = CASE WHEN j.started_at IS NULL OR j.attempts < j.max_attempts THEN NULL ELSE now() END,
        run_at = CASE WHEN j.started_at IS NULL THEN j.run_at WHEN j.attempts < j.max_attempts THEN now() ELSE j.run_at END,
        claim_token = NULL, locked_until = NULL, updated_at = now()
    FROM lost WHERE j.id = lost.id
    RETURNING j.id, j.queue, j.task, j.attempts, j.status`,
  // One statement under SQLite's single writer: nobody can heartbeat in between.
  sqlite: (db) => `
    UPDATE ${db.table}
    SET ${reclaimSet(db, "$3")}
    WHERE status = 'running'
      AND CASE WHEN $1 IS NULL THEN locked_until < ${db.sql.now} ELSE heartbeat_at <= ${db.sql.nowPlus("$1", "-")} END
      AND ($2 IS NULL OR queue = $2)
    RETURNING id, queue, task, attempts, status`,
  // Lock the lost rows, update them, read them back.
  // No SKIP LOCKED here (unlike the claim): with InnoDB, reclaimers scanning the same index
  // at once each skipped rows that another had only half-locked, and expired jobs were left
  // to nobody (bench/BENCHMARKS.md). A plain FOR UPDATE waits instead:
  // a row a heartbeat held is re-read once it commits, so its fresh lease is still honoured,
  // and a second reclaimer finds the first one's rows already pending. Deadlocks are retried.
  mysql:
    (db) =>
    (executor, [lease, queue, prefix]) =>
      lockUpdateRead<{ id: number | string }, ReclaimedRow>(db, executor, {
        lock: async (tx) =>
          (
            await tx.query<{ id: number | string }>(
              `SELECT id FROM ${db.table}
             WHERE status = 'running'
               AND CASE WHEN $1 IS NULL THEN locked_until < ${db.sql.now} ELSE heartbeat_at <= ${db.sql.nowPlus("$1", "-")} END
               AND ($2 IS NULL OR queue = $2)
             ORDER BY id
             FOR UPDATE`,
              [lease, queue],
            )
          ).rows,
        set: () => ({ set: reclaimSet(db, "$2"), params: [prefix] }),
        answer: "id, queue, task, attempts, status",
      }),
};

/**
 * SQLite's and MariaDB's SET of a reclaim. MariaDB assigns left to right: no SET here reads a
 * column an earlier one changed.
 */
function reclaimSet(db: JobsDatabase, prefix: string): string {
  return `status = CASE WHEN started_at IS NULL OR attempts < max_attempts THEN 'pending' ELSE 'failed' END,
        last_error = CASE WHEN started_at IS NULL THEN last_error ELSE ${lostWorkerError(db, prefix)} END,
        finished_at = CASE WHEN started_at IS NULL OR attempts < max_attempts THEN NULL ELSE ${db.sql.now} END,
        run_at = CASE WHEN started_at IS NULL THEN run_at WHEN attempts < max_attempts THEN ${db.sql.now} ELSE run_at END,
        claim_token = NULL, locked_until = NULL, updated_at = ${db.sql.now}`;
}

/**
 * `silentFor`: seconds without a heartbeat after which a running job is taken back, whatever
 * lease it holds (0 = every running job); null: only jobs whose own lease has expired.
 */
export async function reclaimJobs(db: JobsDatabase, silentFor: number | null, queue: string | null): Promise<ReclaimedJob[]> {
  // One transaction: a job failed here releases its dependents and batch with it.
  const rows = await whileEnding(db, () =>
    db.executor.transaction(async (tx) => {
      const reclaimed = (await runSql<ReclaimedRow>(tx, forDialect(RECLAIM, db.dialect, "reclaim")(db), [silentFor, queue, WORKER_LOST_PREFIX])).rows;
      const failed = reclaimed.filter((r) => r.status === "failed").map((r) => Number(r.id));
      await sendDeadLetters(db, tx, failed);
      await settleEndedIds(db, tx, failed, "failed");
      // The lost attempt of a job that runs again goes to its attempts history, in this transaction.
      await recordAttempts(
        db,
        tx,
        reclaimed.filter((r) => r.status === "pending").map((r) => Number(r.id)),
      );
      return reclaimed;
    }),
  );
  return rows.map((r) => ({ id: Number(r.id), queue: r.queue, task: r.task, attempts: Number(r.attempts), status: r.status }));
}

/**
 * Takes back jobs whose worker is gone: pending again while attempts remain, otherwise failed
 * with a `last_error` that says the worker was lost without a verdict. The option is named
 * `lease` by the contract; it means "no heartbeat for this many seconds" (see ReclaimOptions).
 */
export async function reclaim(options: ReclaimOptions = {}): Promise<ReclaimedJob[]> {
  checkOptions(options, RECLAIM_OPTION_KEYS, "reclaim");
  const silentFor = options.lease === undefined ? null : checkSeconds(options.lease, "lease");
  const queue = options.queue === undefined ? null : checkName(options.queue, "queue");
  return reclaimJobs(resolveDb(options.db), silentFor, queue);
}
