import type { JobsDatabase } from "./database.js";
import type { Executor, QueryResult } from "../db/executor.js";

/**
 * A write that answers rows, where UPDATE … RETURNING does not exist (MariaDB): in one short
 * transaction, lock the rows (SELECT … FOR UPDATE), update exactly those, then answer — read
 * back, or from what was locked. The lock makes the answer true: nobody changes a row
 * between the update and the read.
 */
export interface LockUpdateRead<Kept extends { id: number | string }, R extends object> {
  /** Locks the rows to change and returns those this write may change, in the order the update wants them. */
  lock(tx: Executor): Promise<Kept[]>;
  /** The SET clause; `$1` is the kept ids (a list), `params` are `$2…`. */
  set(kept: Kept[]): { set: string; params: unknown[] };
  /** Columns read back from the updated rows, or the answer made from the kept rows. */
  answer: string | ((kept: Kept[]) => R[]);
}

export function lockUpdateRead<Kept extends { id: number | string }, R extends object>(
  db: JobsDatabase,
  executor: Executor,
  steps: LockUpdateRead<Kept, R>,
): Promise<QueryResult<R>> {
  return executor.transaction(async (tx) => {
    const kept = await steps.lock(tx);
    // An empty list is a syntax error (`IN ()`), and there is nothing to do.
    if (kept.length === 0) return { rows: [], rowCount: 0 };
    const ids = kept.map((k) => k.id);
    const { set, params } = steps.set(kept);
    await tx.query(`UPDATE ${db.table} SET ${set} WHERE ${db.sql.inList("id", "$1")}`, [ids, ...params]);
    if (typeof steps.answer === "string") return tx.query<R>(`SELECT ${steps.answer} FROM ${db.table} WHERE ${db.sql.inList("id", "$1")}`, [ids]);
    const rows = steps.answer(kept);
    return { rows, rowCount: rows.length };
  });
}

/**
 * Locks the jobs of `claims` that are still running under the token each was claimed with (in
 * id order, the lock order of every write), and returns those claims, each with the `columns`
 * asked for read from its locked row. A batch may hold two runs of one job (a stale run and
 * its successor): matched on (id, token), never on the id alone.
 */
export async function lockOwnRuns<C extends { id: number; claim_token: string }, Row extends object = object>(
  db: JobsDatabase,
  tx: Executor,
  claims: C[],
  columns: readonly (keyof Row & string)[] = [],
): Promise<(C & Row)[]> {
  const { rows } = await tx.query<{ id: number | string; claim_token: string } & Row>(
    `SELECT id, claim_token${columns.map((c) => `, ${c}`).join("")} FROM ${db.table} WHERE ${db.sql.inList("id", "$1")} AND status = 'running' ORDER BY id FOR UPDATE`,
    [claims.map((c) => c.id)],
  );
  const current = new Map(rows.map((r) => [Number(r.id), r]));
  return claims.flatMap((c) => {
    const row = current.get(c.id);
    return row !== undefined && row.claim_token === c.claim_token ? [{ ...row, ...c }] : [];
  });
}
