import type { JobsDatabase } from "../core/database.js";
import { Fenced, runGivenBackSql } from "./run-given-back.js";
import type { ChildWait } from "./invoke.js";
import { requeueSql } from "./wait-event.js";
import { eventTables } from "../events/event-lock.js";

/** The child's live row, locked: its ending waits for this transaction, and sees the edge written here. */
function lockChildSql(db: JobsDatabase): string {
  return `SELECT status FROM ${db.table} WHERE id = $1${db.dialect === "sqlite" ? "" : " FOR UPDATE"}`;
}

/**
 * The parent to `waiting` on one dependency (the child), released by the child's end whatever
 * it was (policy "run": the parent's `ctx.invoke` reads how it ended); its attempt given back.
 */
function waitSql(db: JobsDatabase): string {
  return runGivenBackSql(db, "status = 'waiting', deps_pending = 1, on_dependency_failure = 'run'");
}

/**
 * Ends a run that waits for its child (`ctx.invoke`), building on dependencies: in one
 * transaction that holds the child's live row, the parent becomes a `waiting` dependent of the
 * child (an edge in jobs_dependencies, the child's has_dependents set), so the write that ends
 * the child releases the parent (dependencies/flow-release.ts) on every path. A child that
 * ended meanwhile (no longer live) makes the parent due again now instead. Fenced by the claim
 * token: false when the job was no longer this run's, nothing written.
 */
export async function writeChildWait(db: JobsDatabase, job: { id: number; token: string }, step: string, wait: ChildWait): Promise<boolean> {
  try {
    return await db.executor.transaction(async (tx) => {
      const { rows } = await tx.query<{ status: string }>(lockChildSql(db), [wait.childId]);
      const live = rows[0] !== undefined && ["pending", "running", "waiting"].includes(String(rows[0].status));
      if (!live) {
        if ((await tx.query(requeueSql(db), [job.id, job.token])).rowCount === 0) throw new Fenced();
        return true;
      }
      if ((await tx.query(waitSql(db), [job.id, job.token])).rowCount === 0) throw new Fenced();
      await tx.query(`DELETE FROM ${db.dependenciesTable} WHERE job_id = $1 AND depends_on_id = $2`, [job.id, wait.childId]);
      await tx.query(`INSERT INTO ${db.dependenciesTable} (job_id, depends_on_id) VALUES ($1, $2)`, [job.id, wait.childId]);
      await tx.query(`UPDATE ${db.table} SET has_dependents = ${db.sql.boolean(true)} WHERE id = $1`, [wait.childId]);
      // What it waits for, for getJobSteps (no event: '' matches no event's name).
      const { waits } = eventTables(db);
      await tx.query(`DELETE FROM ${waits} WHERE job_id = $1`, [job.id]);
      await tx.query(
        `INSERT INTO ${waits} (job_id, step, event, event_key, tenant, child_id, timeout_at, created_at) VALUES ($1, $2, '', '', '', $3, NULL, ${db.sql.now})`,
        [job.id, step, wait.childId],
      );
      return true;
    });
  } catch (error) {
    if (error instanceof Fenced) return false;
    throw error;
  }
}
