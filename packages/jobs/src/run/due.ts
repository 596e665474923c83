import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { forDialect, type PerDialect } from "../core/sql.js";

/**
 * The `due` flag (migration 19): a plain pending job whose run_at is in the future is kept out
 * of the claim index, in the scheduled index, so that a claim's walk never passes over the jobs
 * due tomorrow. The write that sets a future run_at clears the flag (dueAfter); a claim promotes
 * the scheduled jobs whose time has come (promoteDue) before it walks the claim index.
 */

/** Scheduled jobs promoted by one statement; a full batch lets the next claim promote again at once. */
const PROMOTE_BATCH = 1000;
/**
 * Promotions of one database are at least this far apart: under load a claim runs many times a
 * second, and each would otherwise pay a statement to find nothing. A job due at t is claimable
 * at most this long after the first claim past t; an idle worker's poll is further apart anyway.
 */
const PROMOTE_EVERY_MS = 100;

/**
 * SQL for `due` when a write sets run_at to `runAt` (an SQL expression over the row's values
 * before the write). MariaDB assigns left to right: put it before the SET that changes run_at.
 */
export function dueAfter(db: JobsDatabase, runAt: string): string {
  const value = (due: boolean) => String(db.sql.boolean(due)).toUpperCase();
  return `CASE WHEN group_key = '' AND concurrency_key = '' AND ${runAt} > ${db.sql.now} THEN ${value(false)} ELSE ${value(true)} END`;
}

const SCHEDULED = (db: JobsDatabase) => `status = 'pending' AND group_key = '' AND concurrency_key = '' AND ${db.sql.notDue} AND run_at <= ${db.sql.now}`;

/** Promotes up to PROMOTE_BATCH scheduled jobs whose time has come; returns how many. */
const PROMOTE: PerDialect<(db: JobsDatabase) => Promise<number>> = {
  // SKIP LOCKED: two workers promoting at once split the rows instead of waiting on each other,
  // and a caller's uncommitted insert is passed over, not waited for.
  postgres: async (db) =>
    (
      await db.executor.query(
        `UPDATE ${db.table} SET due = true
         WHERE id = ANY(ARRAY(SELECT id FROM ${db.table} WHERE ${SCHEDULED(db)} ORDER BY run_at LIMIT $1 FOR UPDATE SKIP LOCKED))`,
        [PROMOTE_BATCH],
        "promote_due",
      )
    ).rowCount,
  // A plain read first, and a write only when it found jobs: an UPDATE would take SQLite's write
  // lock even to change nothing, and on MariaDB its range scan waits on the next-key lock of a
  // caller's uncommitted insert of a delayed job (a non-locking read does not). The UPDATE by
  // primary key then locks the rows it changes only, and re-checks them.
  sqlite: (db) => readThenPromote(db, `${SCHEDULED(db)} ORDER BY run_at`),
  // scheduled_at is run_at where the row is scheduled, NULL elsewhere (migration 26): its index
  // holds the scheduled jobs without a status a claim would change.
  mysql: (db) => readThenPromote(db, `scheduled_at <= ${db.sql.now} ORDER BY scheduled_at`),
};

async function readThenPromote(db: JobsDatabase, scheduledDue: string): Promise<number> {
  const { rows } = await db.executor.query<{ id: number | string }>(
    `SELECT id FROM ${db.table} WHERE ${scheduledDue} LIMIT $1`,
    [PROMOTE_BATCH],
    "scheduled_due",
  );
  if (rows.length === 0) return 0;
  const { rowCount } = await db.executor.query(`UPDATE ${db.table} SET due = ${db.sql.boolean(true)} WHERE ${db.sql.inList("id", "$1")} AND ${SCHEDULED(db)}`, [
    rows.map((r) => Number(r.id)),
  ]);
  // A full read: more may be waiting, whatever this write changed.
  return rows.length >= PROMOTE_BATCH ? PROMOTE_BATCH : rowCount;
}

const lastPromotion = new WeakMap<Executor, number>();

/**
 * Makes the scheduled jobs whose time has come due. Nothing to await (undefined) when this
 * database promoted less than PROMOTE_EVERY_MS ago: the claim goes on without a round trip.
 */
export function promoteDue(db: JobsDatabase, always = false): Promise<void> | undefined {
  const now = Date.now();
  const last = lastPromotion.get(db.executor);
  if (!always && last !== undefined && now - last < PROMOTE_EVERY_MS) return undefined;
  lastPromotion.set(db.executor, now);
  return forDialect(
    PROMOTE,
    db.dialect,
    "promote due",
  )(db).then((promoted) => {
    // A full batch: more may be waiting, and the next claim promotes them without waiting its turn.
    if (promoted >= PROMOTE_BATCH) lastPromotion.delete(db.executor);
  });
}
