import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import type { DatabaseOptions } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { forDialect, type PerDialect } from "../core/sql.js";

/**
 * The priority an aging job has earned (migration 24): its base plus one step per `aging_every`
 * seconds since its run_at (database clock; none before it), at most `aging_max`. Counted from
 * run_at, so a job that went back to pending (a retry's backoff, a snooze) earns again from its
 * base: while it waits for that run_at its target is the base, and the sweep lowers it.
 */
const TARGET: PerDialect<(now: string) => string> = {
  postgres: (now) => `LEAST(aging_max::bigint, aging_base::bigint + GREATEST(0, floor(extract(epoch FROM ${now} - run_at) / aging_every))::bigint)::int`,
  // Integer division of milliseconds: floor for a run_at passed, and the CASE keeps a future one at 0.
  sqlite: (now) => `MIN(aging_max, aging_base + CASE WHEN run_at > ${now} THEN 0 ELSE (${now} - run_at) / (aging_every * 1000) END)`,
  mysql: (now) => `LEAST(aging_max, aging_base + GREATEST(0, TIMESTAMPDIFF(SECOND, run_at, ${now}) DIV aging_every))`,
};

/** A schema before migration 24: an unknown column (PostgreSQL's 42703, MariaDB's ER_BAD_FIELD_ERROR, SQLite's message), or MariaDB's unknown index of a hint (ER_KEY_DOES_NOT_EXIST). */
function isMissingColumn(error: unknown): boolean {
  const { code, errno, message } = (typeof error === "object" && error !== null ? error : {}) as { code?: unknown; errno?: unknown; message?: unknown };
  return code === "42703" || errno === 1054 || errno === 1176 || (typeof message === "string" && /no such column/i.test(message));
}

/** The pending aging jobs whose stored priority is not what they earned; `jobs_aging` holds only them (none on the plain path). */
export function agingReadSql(db: JobsDatabase): string {
  const target = forDialect(TARGET, db.dialect, "aging target")(db.sql.now);
  // MariaDB's index is on aging_pending (aging_every of a pending job, NULL otherwise: migration
  // 26), which the read must name. With statistics that miss how few rows age, its planner chose
  // to scan the table (priority-aging.test, CI); the hint keeps the sweep on the index.
  const from = db.dialect === "mysql" ? `${db.table} FORCE INDEX (jobs_aging)` : db.table;
  const aging = db.dialect === "mysql" ? "aging_pending IS NOT NULL" : "aging_every IS NOT NULL";
  return `SELECT id, ${target} AS target FROM ${from}
    WHERE status = 'pending' AND ${aging} AND priority <> ${target}`;
}

/**
 * Raises (or, after a retry, lowers back) the stored priority of the pending jobs enqueued with
 * `priorityAging`, so the claim keeps reading its index in (priority DESC, id) order and computes
 * nothing. Read first, then one write per distinct priority, by id and still pending: a job
 * claimed in between is left alone, and SQLite takes no write lock when nothing ages. Run by
 * every worker's sweep (worker/sweep.ts); returns how many jobs changed.
 */
export async function agePendingJobs(db: JobsDatabase): Promise<number> {
  let found;
  try {
    found = await db.executor.query<{ id: number | string; target: number | string }>(agingReadSql(db), []);
  } catch (error) {
    // A worker of this version on a schema before migration 24: nothing ages yet.
    if (isMissingColumn(error)) return 0;
    throw error;
  }
  const byTarget = new Map<number, number[]>();
  for (const { id, target } of found.rows) {
    const ids = byTarget.get(Number(target)) ?? [];
    ids.push(Number(id));
    byTarget.set(Number(target), ids);
  }
  let changed = 0;
  for (const [target, ids] of byTarget) {
    const result = await db.executor.query(
      `UPDATE ${db.table} SET priority = $1 WHERE ${db.sql.inList("id", "$2")} AND status = 'pending' AND aging_every IS NOT NULL`,
      [target, ids],
    );
    changed += result.rowCount ?? 0;
  }
  return changed;
}

/**
 * `agePriorities({ db })`: one pass of priority aging, as every worker's sweep runs it — for a
 * deployment without workers between enqueues, or a cron. Returns how many jobs changed priority.
 */
export async function agePriorities(options: DatabaseOptions = {}): Promise<number> {
  checkOptions(options, DATABASE_OPTION_KEYS, "agePriorities");
  return agePendingJobs(resolveDb(options.db));
}
