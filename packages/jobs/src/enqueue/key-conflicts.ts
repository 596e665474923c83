import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { JobError } from "../base/errors.js";
import { isSerializationFailure } from "../core/sql-errors.js";

/** What a keyed insert that lost needs to find, and check, the job it lost to. */
export interface KeyedJob {
  idempotencyKey: string | null;
  dedupKey: string | null;
  tenant: string | null;
}

/**
 * Under REPEATABLE READ or SERIALIZABLE, a key's holder committed after the transaction's
 * snapshot can be neither seen nor inserted beside: the server refuses the statement.
 */
export function snapshotError(field: string): JobError {
  return new JobError(
    `enqueue: a job with the same ${field} was committed after this transaction's snapshot (REPEATABLE READ or SERIALIZABLE), ` +
      "so the transaction can neither see it nor add a job beside it; roll the transaction back, then enqueue outside the transaction " +
      "or run it at READ COMMITTED",
    field,
  );
}

type Holder = { id: number | string; tenant: string | null };

/**
 * The job a keyed insert lost to. The idempotency key is looked up first (same key, same job,
 * whatever its state); a job with both keys can also lose on its dedup key alone — a new
 * idempotency key while another active job holds the dedup key — and then gets that holder.
 */
export async function findExisting(db: JobsDatabase, executor: Executor, job: KeyedJob, field: (name: string) => string): Promise<number | undefined> {
  const lookups: ["idempotencyKey" | "dedupKey", string, string | null][] = [
    ["idempotencyKey", `SELECT id, tenant FROM ${db.table} WHERE idempotency_key = $1`, job.idempotencyKey],
    ["dedupKey", `SELECT id, tenant FROM ${db.table} WHERE dedup_key = $1 AND status IN ('pending', 'running')`, job.dedupKey],
  ];
  let found: { which: "idempotencyKey" | "dedupKey"; row: Holder } | undefined;
  for (const [which, sql, key] of lookups) {
    if (key === null || found) continue;
    const row = await readHolder(db, executor, sql, key).catch((error: unknown) => {
      if (isSerializationFailure(error, db.dialect)) throw snapshotError(field(which));
      throw error;
    });
    if (row) found = { which, row };
  }
  if (!found) return undefined;
  if ((found.row.tenant ?? null) !== job.tenant) {
    // Keys are unique across tenants; a colliding key must never hand out another tenant's job.
    throw new JobError(`${field(found.which)} is already used by a job of another tenant; include the tenant in the key`, field(found.which));
  }
  return Number(found.row.id);
}

/**
 * Inside a caller's REPEATABLE READ transaction on MariaDB (its default level), a plain read
 * uses the transaction's snapshot and misses a holder committed since, which the insert did
 * run into: a locking read sees the latest committed row. Only then, as it holds a shared lock
 * on the holder until the caller's transaction ends.
 */
async function readHolder(db: JobsDatabase, executor: Executor, sql: string, key: string): Promise<Holder | undefined> {
  const row = (await executor.query<Holder>(sql, [key])).rows[0];
  if (row || db.dialect !== "mysql") return row;
  return (await executor.query<Holder>(`${sql} LOCK IN SHARE MODE`, [key])).rows[0];
}

/**
 * An idempotency key stays taken while its ended job is kept in history, which no unique index
 * of the live table sees (PostgreSQL's history is partitioned by finished time, and a unique
 * index there must hold the partition key). So a keyed insert looks its keys up in history in
 * a later statement of its transaction: at READ COMMITTED that statement sees a holder that
 * ended before it (a job ending while the insert waited on its live row is in history by then).
 * The jobs found there win: this call's rows for those keys are deleted again, and the
 * ended jobs' ids returned in their place. `inserted` maps an index of `jobs` to the id this
 * call inserted for it.
 */
export async function yieldToEndedKeys(
  db: JobsDatabase,
  executor: Executor,
  jobs: readonly KeyedJob[],
  inserted: ReadonlyMap<number, number>,
  field: (index: number, name: string) => string,
): Promise<Map<number, number>> {
  const keyed = [...inserted.keys()].filter((i) => jobs[i]?.idempotencyKey != null);
  const won = new Map<number, number>();
  if (keyed.length === 0) return won;
  const keys = keyed.map((i) => jobs[i]?.idempotencyKey as string);
  const { rows } = await executor.query<Holder & { idempotency_key: string }>(
    `SELECT id, tenant, idempotency_key FROM ${db.historyTable} WHERE ${db.sql.inList("idempotency_key", "$1")}`,
    [keys],
  );
  if (rows.length === 0) return won;
  const holders = new Map(rows.map((r) => [r.idempotency_key, r]));
  for (const i of keyed) {
    const holder = holders.get(jobs[i]?.idempotencyKey as string);
    if (!holder) continue;
    if ((holder.tenant ?? null) !== (jobs[i]?.tenant ?? null)) {
      throw new JobError(`${field(i, "idempotencyKey")} is already used by a job of another tenant; include the tenant in the key`, field(i, "idempotencyKey"));
    }
    won.set(i, Number(holder.id));
  }
  const mine = [...won.keys()].map((i) => inserted.get(i) as number);
  if (mine.length > 0) await executor.query(`DELETE FROM ${db.table} WHERE ${db.sql.inList("id", "$1")}`, [mine]);
  return won;
}
