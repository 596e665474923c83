import type { JobStatus } from "../base/types.js";
import type { JobsDatabase } from "./database.js";

/**
 * Where reads find a job. The live table holds the jobs that can still run; the write that
 * ends a job moves it to history (run/ended.ts). A database upgraded from an older version
 * still holds ended rows in the live table until the online upgrade has moved them, so a read
 * of ended jobs reads both tables, and a read of live ones the live table alone. A job is in
 * exactly one of them at every instant, so a read that reads both in ONE statement (one
 * snapshot) never sees a job twice nor misses one that moved meanwhile.
 */

/** The statuses a job can only have in the live table. */
const LIVE: readonly JobStatus[] = ["pending", "running", "waiting"];

/** The tables that can hold jobs in `status` (any status: both), the live table first. */
export function storesOf(db: JobsDatabase, status?: JobStatus): string[] {
  return status !== undefined && LIVE.includes(status) ? [db.table] : [db.table, db.historyTable];
}

/**
 * SQL: `select` (a statement reading the table it is given) over each of `stores`, as one
 * UNION ALL. Each branch keeps its own WHERE, so each reads its table through that table's
 * indexes: no union is materialised and then filtered (MariaDB would read both tables whole).
 */
export function eachStore(select: (table: string) => string, stores: readonly string[]): string {
  return stores.map(select).join(" UNION ALL ");
}

/**
 * SQL: the first `limit` rows by `order` (`id DESC`) of `select` over each of `stores`: each
 * branch ordered and stopped by its own LIMIT (so it reads the newest entries of an index and
 * stops), then merged and cut again. The same text runs on the three backends.
 */
export function firstOfEach(select: (table: string) => string, stores: readonly string[], order: string, limit: number): string {
  const branch = (table: string) => `${select(table)} ORDER BY ${order} LIMIT ${limit}`;
  if (stores.length === 1) return branch(stores[0]!);
  return `SELECT * FROM (${stores.map((table, i) => `SELECT * FROM (${branch(table)}) AS s${i}`).join(" UNION ALL ")}) AS merged ORDER BY ${order} LIMIT ${limit}`;
}
