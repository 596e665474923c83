import type { JobsDatabase } from "../core/database.js";

/**
 * What pruning must keep for dependencies and batches, as conditions on the jobs table's row
 * being deleted (named by its qualified table, `db.table`): a finished job stays while a job
 * that depends on it has not ended (it reads the result with ctx.dependencies()), and a
 * batch's item stays until the batch's callback has ended (it reads the counts with ctx.batch()).
 */
export function keptForFlows(db: JobsDatabase, row: string = db.table): string {
  return `NOT (${row}.has_dependents AND EXISTS (
      SELECT 1 FROM ${db.dependenciesTable} e JOIN ${db.table} w ON w.id = e.job_id
      WHERE e.depends_on_id = ${row}.id AND w.status IN ('waiting', 'pending', 'running')))
    AND NOT (${row}.batch_id IS NOT NULL AND EXISTS (
      SELECT 1 FROM ${db.batchesTable} b JOIN ${db.table} cb ON cb.id = b.callback_id
      WHERE b.id = ${row}.batch_id AND cb.status IN ('waiting', 'pending', 'running')))`;
}

/** After a prune: the edges of jobs that no longer exist (their dependents had all ended). */
export async function pruneFlowEdges(db: JobsDatabase): Promise<void> {
  await db.executor.query(`DELETE FROM ${db.dependenciesTable} WHERE NOT EXISTS (SELECT 1 FROM ${db.table} j WHERE j.id = ${db.dependenciesTable}.job_id)`);
}
