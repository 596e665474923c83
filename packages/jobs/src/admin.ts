import { resolveDb, type DbLike } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { mysqlNowPlus } from "./db/mysql.js";
import { sqliteNowPlus } from "./db/sqlite.js";
import { dbNow, forDialect, type PerDialect } from "./sql.js";
import { checkSeconds } from "./validate.js";

/**
 * Cancels a pending or running job. A running handler sees its `ctx.signal` fire at its
 * worker's next lease extension, and its completion is refused (fenced).
 */
export async function cancelJob(id: number, options: { db?: DbLike; tenant?: string | null } = {}): Promise<boolean> {
  const db = resolveDb(options.db);
  const tenant = options.tenant ?? null;
  const { rowCount } = await db.executor.query(
    `UPDATE ${db.table} SET status = 'cancelled', claim_token = NULL, locked_until = NULL, finished_at = ${now(db)}, updated_at = ${now(db)}
     WHERE id = $1 AND status IN ('pending', 'running')${tenant === null ? "" : " AND tenant = $2"}`,
    tenant === null ? [id] : [id, tenant],
  );
  return rowCount > 0;
}

/** Puts a failed or cancelled job back in its queue now, with one more attempt allowed. */
export async function retryJob(id: number, options: { db?: DbLike; tenant?: string | null } = {}): Promise<boolean> {
  const db = resolveDb(options.db);
  const tenant = options.tenant ?? null;
  const { rowCount } = await db.executor.query(
    `UPDATE ${db.table} SET status = 'pending', run_at = ${now(db)}, finished_at = NULL, updated_at = ${now(db)},
       max_attempts = CASE WHEN max_attempts > attempts THEN max_attempts ELSE attempts + 1 END
     WHERE id = $1 AND status IN ('failed', 'cancelled')${tenant === null ? "" : " AND tenant = $2"}`,
    tenant === null ? [id] : [id, tenant],
  );
  return rowCount > 0;
}

const OLDER_THAN: PerDialect<(seconds: string) => string> = {
  postgres: (s) => `now() - make_interval(secs => ${s})`,
  sqlite: (s) => sqliteNowPlus(s, "-"),
  mysql: (s) => mysqlNowPlus(s, "-"),
};

/** Deletes finished jobs (done, failed, cancelled) that ended more than `olderThan` seconds ago. */
export async function prune(options: { olderThan: number; db?: DbLike; statuses?: ("done" | "failed" | "cancelled")[] }): Promise<number> {
  const db = resolveDb(options.db);
  const olderThan = checkSeconds(options.olderThan, "olderThan");
  const statuses = options.statuses ?? ["done", "failed", "cancelled"];
  const placeholders = statuses.map((_, i) => `$${i + 2}`).join(", ");
  const { rowCount } = await db.executor.query(
    `DELETE FROM ${db.table} WHERE status IN (${placeholders}) AND finished_at < ${forDialect(OLDER_THAN, db.dialect, "prune")("$1")}`,
    [olderThan, ...statuses],
  );
  return rowCount;
}

function now(db: JobsDatabase): string {
  return dbNow(db.dialect);
}
