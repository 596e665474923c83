import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import type { BatchSummary, DependencyInfo, Job, JobDependencyWait, JobStatus } from "../base/types.js";
import { eachStore, storesOf } from "../core/stores.js";
import { openJson } from "../base/payload-codec.js";

/**
 * Reads of dependencies and batches: what `ctx.dependencies()`, `ctx.batch()` and `getJob`
 * show. Every read is scoped to the job's own tenant (dependencies are same-tenant by
 * construction; the condition keeps a read from ever crossing). A dependency or a batch's item
 * that ended is read from history (or from the live table, where a database not yet upgraded
 * keeps it): one statement over both, each through its own index.
 */

const sameTenant = (column: string, parameter: string) => `(${column} = ${parameter} OR (${column} IS NULL AND ${parameter} IS NULL))`;

/** The jobs `jobId` depends on, with their status and result, in id order. */
export async function readDependencies(db: JobsDatabase, jobId: number, tenant: string | null): Promise<DependencyInfo[]> {
  const edges = (table: string) => `SELECT j.id, j.task, j.status, j.result FROM ${db.dependenciesTable} e JOIN ${table} j ON j.id = e.depends_on_id
     WHERE e.job_id = $1 AND ${sameTenant("j.tenant", "$2")}`;
  const { rows } = await db.executor.query<{ id: number | string; task: string; status: JobStatus; result: unknown }>(
    `SELECT * FROM (${eachStore(edges, storesOf(db))}) AS d ORDER BY id`,
    [jobId, tenant],
  );
  return rows.map((r) => ({ id: Number(r.id), task: r.task, status: r.status, result: openJson(db.settings.payloadCodec, db.sql.readJson(r.result)) }));
}

/** How the items of the batch whose callback is `callbackId` ended; null when it is no batch's callback. */
export async function readBatchSummary(db: JobsDatabase, callbackId: number, tenant: string | null): Promise<BatchSummary | null> {
  const batch = await db.executor.query<{ id: number | string }>(`SELECT id FROM ${db.batchesTable} WHERE callback_id = $1 AND ${sameTenant("tenant", "$2")}`, [
    callbackId,
    tenant,
  ]);
  const row = batch.rows[0];
  if (!row) return null;
  const batchId = Number(row.id);
  // Counted per table and added up: each count reads its table's (batch_id, id) index.
  const counts = await db.executor.query<{ status: string; n: number | string }>(
    eachStore((table) => `SELECT status, count(*) AS n FROM ${table} WHERE batch_id = $1 AND ${sameTenant("tenant", "$2")} GROUP BY status`, storesOf(db)),
    [batchId, tenant],
  );
  const summary: BatchSummary = { batchId, done: 0, failed: 0, cancelled: 0, failedIds: [] };
  for (const c of counts.rows) if (c.status === "done" || c.status === "failed" || c.status === "cancelled") summary[c.status] += Number(c.n);
  if (summary.failed > 0) {
    const failed = await db.executor.query<{ id: number | string }>(
      `SELECT id FROM (${eachStore((table) => `SELECT id FROM ${table} WHERE batch_id = $1 AND status = 'failed' AND ${sameTenant("tenant", "$2")}`, storesOf(db, "failed"))}) AS f ORDER BY id`,
      [batchId, tenant],
    );
    summary.failedIds = failed.rows.map((r) => Number(r.id));
  }
  return summary;
}

/** getJob's `dependsOn` and `dependents`, read only for a job that has either. */
export async function withEdges(db: JobsDatabase, executor: Executor, job: Job, flags: { dependsOn: boolean; dependents: boolean }): Promise<Job> {
  if (flags.dependsOn) {
    const { rows } = await executor.query<{ id: number | string }>(
      `SELECT depends_on_id AS id FROM ${db.dependenciesTable} WHERE job_id = $1 ORDER BY depends_on_id`,
      [job.id],
    );
    job.dependsOn = rows.map((r) => Number(r.id));
  }
  if (flags.dependents) {
    const { rows } = await executor.query<{ id: number | string }>(
      `SELECT job_id AS id FROM ${db.dependenciesTable} WHERE depends_on_id = $1 ORDER BY job_id`,
      [job.id],
    );
    job.dependents = rows.map((r) => Number(r.id));
  }
  return job;
}

/** getJob's `waitingFor` for a `waiting` job with dependencies: those not done, and the failed ones that hold it. */
export async function readDependencyWait(db: JobsDatabase, jobId: number): Promise<JobDependencyWait> {
  const edges = (table: string) =>
    `SELECT j.id, j.status, e.holds FROM ${db.dependenciesTable} e JOIN ${table} j ON j.id = e.depends_on_id WHERE e.job_id = $1 AND j.status <> 'done'`;
  const { rows } = await db.executor.query<{ id: number | string; status: JobStatus; holds: unknown }>(
    `SELECT * FROM (${eachStore(edges, storesOf(db))}) AS d ORDER BY id`,
    [jobId],
  );
  return {
    kind: "dependencies",
    jobIds: rows.map((r) => Number(r.id)),
    held: rows.filter((r) => r.status === "failed" && Boolean(Number(r.holds))).map((r) => Number(r.id)),
  };
}
