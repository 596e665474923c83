import { JobAbortedError } from "../base/abort.js";
import { saveProgressSql } from "./checkpoint.js";
import { resolveDb } from "../core/connect.js";
import { JobError } from "../base/errors.js";
import type { DbLike } from "../core/options.js";
import { toJsonText } from "../base/payload.js";
import type { JobContext } from "../base/types.js";
import { RunContext } from "./context.js";

/**
 * `ctx.checkpoint` for a transaction the application opened (an ORM's): saves `progress` with
 * the same fenced write, through `db` — the ORM's transaction, e.g. `fromQuery(...)` over it —
 * so the handler's own writes in that transaction and the progress commit together. When the
 * job was taken over (its claim token no longer matches), it throws a `JobAbortedError`: let it
 * propagate out of the ORM's transaction callback so the ORM rolls the batch back. The progress
 * lands when the ORM commits; `ctx.progress` is left as it was (the handler holds its cursor).
 */
export async function checkpointIn(db: DbLike, ctx: JobContext, progress: unknown): Promise<void> {
  const scope = RunContext.scopeOf(ctx);
  if (!scope) throw new JobError("checkpointIn: ctx must be the context a worker passed to the handler", "ctx");
  const target = resolveDb(db);
  if (target.table !== scope.db.table) {
    throw new JobError(
      `checkpointIn: db reaches the jobs table ${target.table}, but this job runs from ${scope.db.table}: give fromQuery the worker's schema`,
      "db",
    );
  }
  const json = toJsonText(progress, "progress");
  const { rowCount } = await target.executor.query(saveProgressSql(target), [scope.job.id, scope.job.token, json, scope.lease]);
  if (rowCount > 0) return;
  scope.fenced();
  throw new JobAbortedError("lease-lost", `checkpointIn: job ${scope.job.id} was taken over; this run no longer owns it, so its transaction must roll back`);
}
