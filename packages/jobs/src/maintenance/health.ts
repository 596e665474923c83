import type { JobsDatabase } from "../core/database.js";
import { latestVersion, schemaVersion } from "../migrations/migrate.js";
import { dbNow } from "../core/sql.js";

/**
 * The read-only checks behind `forge-jobs doctor`. Each says what it found; wording it and
 * deciding what is a problem is the CLI's job.
 */

/** Null when a query reaches the database, else the driver's reason. */
export async function connectionError(db: JobsDatabase): Promise<string | null> {
  try {
    await db.executor.query("SELECT 1");
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** The applied schema version (0: never migrated) and the one this package needs. */
export async function schemaState(db: JobsDatabase): Promise<{ version: number; latest: number }> {
  return { version: await schemaVersion({ db }), latest: latestVersion(db.dialect) };
}

/** Running jobs whose lease has run out by the database's clock: their worker is likely lost. */
export async function jobsPastLease(db: JobsDatabase): Promise<number> {
  const { rows } = await db.executor.query<{ n: number | string }>(
    `SELECT count(*) AS n FROM ${db.table} WHERE status = 'running' AND locked_until < ${dbNow(db.dialect)}`,
  );
  return Number(rows[0]?.n ?? 0);
}

/** Task names of pending or running jobs with their counts, for the ones `handled` says no to. */
export async function tasksWithoutHandler(
  db: JobsDatabase,
  handled: (task: string) => boolean,
): Promise<{ queued: number; missing: { task: string; count: number }[] }> {
  const { rows } = await db.executor.query<{ task: string; n: number | string }>(
    `SELECT task, count(*) AS n FROM ${db.table} WHERE status IN ('pending', 'running') GROUP BY task`,
  );
  return { queued: rows.length, missing: rows.filter((r) => !handled(r.task)).map((r) => ({ task: r.task, count: Number(r.n) })) };
}

/** Schedules whose task `handled` does not know: each of their runs would fail with "no handler". */
export async function schedulesWithoutHandler(
  db: JobsDatabase,
  handled: (task: string) => boolean,
): Promise<{ schedules: number; missing: { name: string; task: string }[] }> {
  const { rows } = await db.executor.query<{ name: string; task: string }>(`SELECT name, task FROM ${db.schedulesTable} ORDER BY name`);
  return { schedules: rows.length, missing: rows.filter((r) => !handled(r.task)).map((r) => ({ name: r.name, task: r.task })) };
}
