import type { JobsDatabase } from "../core/database.js";
import { lockOwnRuns, lockUpdateRead } from "../core/lock-update-read.js";
import type { Executor } from "../db/executor.js";
import { errorMessage } from "../base/errors.js";
import { failJob } from "./fail.js";
import { releaseAfterEnd, type EndedJob } from "../dependencies/flow-release.js";
import { quotedBytes, statementBudget } from "../core/packet.js";
import { refusedForItsValues } from "../core/refusals.js";
import { forDialect, groupsBySize, runSql, type PerDialect, type Script } from "../core/sql.js";

/** One finished run, reported with the token it was claimed under. */
export interface Completion {
  id: number;
  token: string;
  /** JSON text of the handler's result, or null. */
  result: string | null;
}

/** A completed row: its token, and what releaseAfterEnd needs (read only by the flow path). */
interface CompletedRow {
  id: number | string;
  claim_token: string;
  has_dependents?: unknown;
  batch_id?: number | string | null;
}

/**
 * `flow`: false for the plain statement, which completes only jobs without dependents or a
 * batch (the guard is read on the row's latest version, so a dependent enqueued meanwhile
 * sends its job to the flow statement); true for the flow statement, which returns what the
 * release needs and runs inside the transaction that releases (completeGroup).
 */
const COMPLETE: PerDialect<(db: JobsDatabase, flow: boolean) => string | Script<CompletedRow>> = {
  // Fenced by the token alone: it is cleared whenever a job leaves `running` (done here,
  // failed, reclaimed, cancelled, handed back), so a taken-over run matches nothing. Without a
  // `status = 'running'` condition the planner cannot drive the join from the jobs_running
  // partial index — which statistics taken while nothing ran estimate at one row, turning
  // each batch into running-rows × batch comparisons — only from the primary key, by the join
  // on v. No `j.id = ANY($1)` beside it: with the guard on dependents and batches, the generic
  // plan of a fresh table (no statistics) estimated that scan at one row and put the unnest
  // inside a nested loop, rescanned per row — batch × batch comparisons, a completion of
  // 1,000 jobs in 190 ms. Driven from v, a batch is one primary-key probe per job (or, on a
  // small table, one hash join).
  postgres: (db, flow) => `
    UPDATE ${db.table} AS j
    SET status = 'done', result = v.result::jsonb, finished_at = now(), updated_at = now(), locked_until = NULL, claim_token = NULL
    FROM unnest($1::bigint[], $2::uuid[], $3::text[]) AS v(id, token, result)
    WHERE j.id = v.id AND j.claim_token = v.token${flow ? "" : " AND NOT j.has_dependents AND j.batch_id IS NULL"}
    RETURNING j.id, v.token::text AS claim_token${flow ? ", j.has_dependents, j.batch_id" : ""}`,
  // One JSON array of [id, token, result] triples, read by one json_each: joining three
  // json_each (one per array) on their keys was a nested loop, quadratic in the batch, that
  // capped SQLite's throughput whatever the concurrency. Rows are found by id (rowid):
  // the unary + keeps `status = 'running'` from steering the planner to the jobs_running
  // index, a scan of every running row per element of the batch.
  sqlite:
    (db, flow) =>
    (executor, [ids, tokens, results]) =>
      executor.query<CompletedRow>(
        `UPDATE ${db.table} AS j
       SET status = 'done', result = v.result, finished_at = ${db.sql.now}, updated_at = ${db.sql.now}, locked_until = NULL
       FROM (SELECT json_extract(e.value, '$[0]') AS id, json_extract(e.value, '$[1]') AS token, json_extract(e.value, '$[2]') AS result
             FROM json_each($1) AS e) AS v
       WHERE j.id = v.id AND j.claim_token = v.token AND +j.status = 'running'${flow ? "" : " AND NOT j.has_dependents AND j.batch_id IS NULL"}
       RETURNING id, claim_token${flow ? ", has_dependents, batch_id" : ""}`,
        [JSON.stringify((ids as number[]).map((id, i) => [id, (tokens as string[])[i], (results as (string | null)[])[i] ?? null]))],
      ),
  // No UPDATE … RETURNING: lock the rows still ours, then update exactly those, in one
  // transaction (completeGroup's). Matched on (id, token) by lockOwnRuns, or a stale run's
  // result could land beside its successor's. One statement serves both: the flags come with the lock.
  mysql:
    (db) =>
    (tx, [ids, tokens, results]) =>
      lockUpdateRead(db, tx, {
        lock: (t) =>
          lockOwnRuns<{ id: number; claim_token: string; result: string | null }, Pick<CompletedRow, "has_dependents" | "batch_id">>(
            db,
            t,
            (ids as number[]).map((id, i) => ({ id, claim_token: (tokens as string[])[i] as string, result: (results as (string | null)[])[i] ?? null })),
            ["has_dependents", "batch_id"],
          ),
        set: (kept) => ({
          set: `status = 'done', result = ${db.sql.mariadb!.valueForId("$1", "$2")}, finished_at = ${db.sql.now}, updated_at = ${db.sql.now}, locked_until = NULL`,
          params: [kept.map((k) => k.result)],
        }),
        answer: (kept): CompletedRow[] => kept.map(({ id, claim_token, has_dependents, batch_id }) => ({ id, claim_token, has_dependents, batch_id })),
      }),
};

/**
 * Results per statement where the server sets no limit of its own: one statement of 1,000
 * results of 1 MiB each would be a gigabyte to build, send and parse at once.
 */
const MAX_STATEMENT_BYTES = 32 * 1024 * 1024;
/** A row's id, token and SQL around its result. */
const ROW_OVERHEAD = 128;

/**
 * Marks jobs done; returns the claim tokens that were still current (the rest were fenced).
 * Tokens, not ids: two runs of one job can sit in the same batch.
 *
 * One statement, or several in one transaction when the results are too large for one (MariaDB
 * refuses a statement over its max_allowed_packet). A batch the database refuses for its values
 * (a result it cannot store) is split until the completion at fault is alone, and that job is
 * failed with the database's reason: retried as it was, the batch could only fail again, and
 * its jobs stayed running for good. Other errors (a lost connection) reach the caller, to retry.
 */
export async function completeRuns(db: JobsDatabase, unordered: readonly Completion[]): Promise<Set<string>> {
  if (unordered.length === 0) return new Set();
  // Id order, as in extendLeases: the same lock order on every connection, so no deadlock.
  const completions = [...unordered].sort((a, b) => a.id - b.id);
  try {
    const groups =
      db.dialect === "mysql" ? bySize(completions, await statementBudget(db), quotedBytes) : bySize(completions, MAX_STATEMENT_BYTES, (r) => r.length * 3);
    if (groups.length === 1) return await completeGroup(db, db.executor, completions);
    return await db.executor.transaction(async (tx) => {
      const kept = new Set<string>();
      for (const group of groups) for (const token of await completeGroup(db, tx, group)) kept.add(token);
      return kept;
    });
  } catch (error) {
    if (!refusedForItsValues(db.dialect, error)) throw error;
    return completeApart(db, completions, error);
  }
}

async function completeApart(db: JobsDatabase, completions: Completion[], error: unknown): Promise<Set<string>> {
  if (completions.length === 1) {
    const { id, token } = completions[0] as Completion;
    // Reported to the caller as not kept (the run's success did not land); the row says why.
    const reason = error instanceof Error ? error.message : errorMessage(error);
    await failJob(db, id, token, { kind: "fail" }, `the database refused to store the result of job ${id}: ${reason}`);
    return new Set();
  }
  const half = Math.ceil(completions.length / 2);
  const kept = await completeRuns(db, completions.slice(0, half));
  for (const token of await completeRuns(db, completions.slice(half))) kept.add(token);
  return kept;
}

/** Consecutive groups whose results fit `budget` bytes each, as `measure` counts them; one oversized result goes alone. */
function bySize(completions: Completion[], budget: number, measure: (result: string) => number): Completion[][] {
  return groupsBySize(completions, { maxBytes: budget }, (c) => ROW_OVERHEAD + (c.result === null ? 0 : measure(c.result)));
}

/**
 * Completes a group: jobs nobody waits on in one statement, as before; the others (dependents,
 * batch items, and the fenced, which the first statement cannot tell apart) in a transaction
 * that also releases what waited on them (flow-release.ts), so a crash commits both or neither.
 * MariaDB's completion is a transaction anyway: one pass does both.
 */
async function completeGroup(db: JobsDatabase, executor: Executor, completions: Completion[]): Promise<Set<string>> {
  const kept = new Set<string>();
  let rest = completions;
  if (db.dialect !== "mysql") {
    const { rows } = await runSql<CompletedRow>(executor, forDialect(COMPLETE, db.dialect, "complete")(db, false), params(completions), "complete");
    for (const row of rows) kept.add(String(row.claim_token));
    rest = completions.filter((c) => !kept.has(c.token));
    if (rest.length === 0) return kept;
  }
  return executor.transaction(async (tx) => {
    const { rows } = await runSql<CompletedRow>(tx, forDialect(COMPLETE, db.dialect, "complete")(db, true), params(rest), "complete_flow");
    for (const row of rows) kept.add(String(row.claim_token));
    await releaseAfterEnd(db, tx, rows.map(endedDone));
    return kept;
  });
}

function params(completions: Completion[]): unknown[] {
  return [completions.map((c) => c.id), completions.map((c) => c.token), completions.map((c) => c.result)];
}

function endedDone(row: CompletedRow): EndedJob {
  return {
    id: Number(row.id),
    status: "done",
    hasDependents: Boolean(Number(row.has_dependents ?? 0)),
    batchId: row.batch_id === null || row.batch_id === undefined ? null : Number(row.batch_id),
  };
}
