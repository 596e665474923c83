import type { JobsDatabase } from "../core/database.js";

/**
 * What pruning must keep for dependencies and batches, as conditions on the row being deleted
 * (named by `row`, a table or an alias): an ended job stays while a job that depends on it has
 * not ended (it reads the result with ctx.dependencies()), and a batch's item stays until the
 * batch's callback has ended (it reads the counts with ctx.batch()). Dependents and callbacks
 * that have not ended are live jobs: the live table's. `marked` says the row's has_dependents
 * can be trusted to skip the edge probe: true of the live table's rows; a history row is not
 * marked when a dependent names it after it ended (enqueue does not write history).
 */
export function keptForFlows(db: JobsDatabase, row: string = db.table, marked = true): string {
  return `NOT (${marked ? `${row}.has_dependents AND ` : ""}EXISTS (
      SELECT 1 FROM ${db.dependenciesTable} e JOIN ${db.table} w ON w.id = e.job_id
      WHERE e.depends_on_id = ${row}.id AND w.status IN ('waiting', 'pending', 'running')))
    AND NOT (${row}.batch_id IS NOT NULL AND EXISTS (
      SELECT 1 FROM ${db.batchesTable} b JOIN ${db.table} cb ON cb.id = b.callback_id
      WHERE b.id = ${row}.batch_id AND cb.status IN ('waiting', 'pending', 'running')))`;
}

/** After a prune: the edges of jobs that no longer exist in either table (their dependents had all ended). */
export async function pruneFlowEdges(db: JobsDatabase): Promise<void> {
  const gone = (table: string) => `NOT EXISTS (SELECT 1 FROM ${table} j WHERE j.id = ${db.dependenciesTable}.job_id)`;
  await db.executor.query(`DELETE FROM ${db.dependenciesTable} WHERE ${gone(db.table)} AND ${gone(db.historyTable)}`);
}
