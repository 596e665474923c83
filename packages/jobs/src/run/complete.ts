import type { JobsDatabase } from "../core/database.js";
import { lockOwnRuns } from "../core/lock-update-read.js";
import type { StoredColumn } from "../core/job-row.js";
import { endingSelect, STORED_LIST, whileEnding } from "./ended.js";
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

/** The ended row's values, replacing the live row's in what goes into history. */
function doneValues(db: JobsDatabase, result: string): Partial<Record<StoredColumn, string>> {
  const typed = (type: string) => (db.dialect === "postgres" ? `NULL::${type}` : "NULL");
  return {
    status: "'done'",
    result,
    finished_at: db.sql.now,
    updated_at: db.sql.now,
    locked_until: typed("timestamptz"),
    claim_token: typed("uuid"),
  };
}

/**
 * `flow`: false for the plain statement, which completes only jobs without dependents or a
 * batch (the guard is read on the row's latest version, so a dependent enqueued meanwhile
 * sends its job to the flow statement); true for the flow statement, which returns what the
 * release needs and runs inside the transaction that releases (completeGroup).
 *
 * A completed job leaves the live table in the write that completes it (run/ended.ts): its row
 * goes into history with the ending values.
 */
const COMPLETE: PerDialect<(db: JobsDatabase, flow: boolean) => string | Script<CompletedRow>> = {
  // One statement: the DELETE … RETURNING feeds the history INSERT, so the job is in exactly
  // one table at every instant. Fenced by the token alone: it is cleared whenever a job leaves
  // `running` (failed, reclaimed, cancelled, handed back), so a taken-over run matches nothing.
  // Driven from v: a batch is one primary-key probe per job (or, on a small table, one hash
  // join); no `j.id = ANY($1)` beside the join, whose generic plan once put the unnest inside a
  // nested loop, rescanned per row.
  postgres: (db, flow) => `
    WITH gone AS (
      DELETE FROM ${db.table} AS j
      USING unnest($1::bigint[], $2::uuid[], $3::text[]) AS v(id, token, result)
      WHERE j.id = v.id AND j.claim_token = v.token${flow ? "" : " AND NOT j.has_dependents AND j.batch_id IS NULL"}
      RETURNING ${endingSelect("j", doneValues(db, "v.result::jsonb"))}, v.token::text AS kept_token
    ), moved AS (
      INSERT INTO ${db.historyTable} (${STORED_LIST}) SELECT ${STORED_LIST} FROM gone
    )
    SELECT id, kept_token AS claim_token${flow ? ", has_dependents, batch_id" : ""} FROM gone`,
  // In completeGroup's transaction: copy the completed rows into history with their ending
  // values, then delete them, returning the tokens that were current. One JSON array of
  // [id, token, result] triples, read by one json_each (joining three json_each on their keys
  // was a nested loop, quadratic in the batch). Rows are found by id (rowid): the unary +
  // keeps `status = 'running'` from steering the planner to the running jobs' index. The
  // DELETE matches the same rows as the INSERT, by the same join, under SQLite's single writer,
  // in one transaction.
  sqlite:
    (db, flow) =>
    async (executor, [ids, tokens, results]) => {
      const triples = JSON.stringify((ids as number[]).map((id, i) => [id, (tokens as string[])[i], (results as (string | null)[])[i] ?? null]));
      const jGuard = flow ? "" : " AND NOT j.has_dependents AND j.batch_id IS NULL";
      await executor.query(
        `INSERT INTO ${db.historyTable} (${STORED_LIST})
         SELECT ${endingSelect("j", doneValues(db, "v.result"))}
         FROM (SELECT json_extract(e.value, '$[0]') AS id, json_extract(e.value, '$[1]') AS token, json_extract(e.value, '$[2]') AS result
               FROM json_each($1) AS e) AS v, ${db.table} AS j
         WHERE j.id = v.id AND j.claim_token = v.token AND +j.status = 'running'${jGuard}`,
        [triples],
      );
      return executor.query<CompletedRow>(
        `DELETE FROM ${db.table}
         WHERE id IN (SELECT j.id FROM json_each($1) AS e, ${db.table} AS j
                      WHERE j.id = json_extract(e.value, '$[0]') AND j.claim_token = json_extract(e.value, '$[1]') AND +j.status = 'running'${jGuard})
         RETURNING id, claim_token${flow ? ", has_dependents, batch_id" : ""}`,
        [triples],
      );
    },
  // No DELETE … RETURNING worth its locks here: lock the rows still ours, copy exactly those
  // into history, delete them, in one transaction (completeGroup's). Matched on (id, token) by
  // lockOwnRuns, or a stale run's result could land beside its successor's. The flags come
  // with the lock.
  mysql:
    (db) =>
    async (tx, [ids, tokens, results]) => {
      const kept = await lockOwnRuns<{ id: number; claim_token: string; result: string | null }, Pick<CompletedRow, "has_dependents" | "batch_id">>(
        db,
        tx,
        (ids as number[]).map((id, i) => ({ id, claim_token: (tokens as string[])[i] as string, result: (results as (string | null)[])[i] ?? null })),
        ["has_dependents", "batch_id"],
      );
      if (kept.length === 0) return { rows: [], rowCount: 0 };
      const keptIds = kept.map((k) => k.id);
      await tx.query(
        `INSERT INTO ${db.historyTable} (${STORED_LIST})
         SELECT ${endingSelect("j", doneValues(db, db.sql.mariadb!.valueForId("$1", "$2")))} FROM ${db.table} AS j WHERE ${db.sql.inList("j.id", "$1")}`,
        [keptIds, kept.map((k) => k.result)],
      );
      await tx.query(`DELETE FROM ${db.table} WHERE ${db.sql.inList("id", "$1")}`, [keptIds]);
      const rows = kept.map(({ id, claim_token, has_dependents, batch_id }) => ({ id, claim_token, has_dependents, batch_id }));
      return { rows, rowCount: rows.length };
    },
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
    return await whileEnding(db, async () => {
      const groups =
        db.dialect === "mysql" ? bySize(completions, await statementBudget(db), quotedBytes) : bySize(completions, MAX_STATEMENT_BYTES, (r) => r.length * 3);
      if (groups.length === 1) return await completeGroup(db, db.executor, completions);
      return await db.executor.transaction(async (tx) => {
        const kept = new Set<string>();
        for (const group of groups) for (const token of await completeGroup(db, tx, group)) kept.add(token);
        return kept;
      });
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
    const plain = forDialect(COMPLETE, db.dialect, "complete")(db, false);
    // SQLite's is two statements (copy, delete): one transaction.
    const { rows } =
      db.dialect === "postgres"
        ? await runSql<CompletedRow>(executor, plain, params(completions), "complete")
        : await executor.transaction((tx) => runSql<CompletedRow>(tx, plain, params(completions), "complete"));
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
