import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { insertInTransaction } from "./enqueue.js";
import { JobError } from "../base/errors.js";
import { releaseCallback } from "../dependencies/flow-release.js";
import { isItemShaped, prepareJob, type NewJob } from "./new-job.js";
import { DEFAULT_QUEUE, type DbLike, type EnqueueManyItem } from "../core/options.js";
import { ENQUEUE_ITEM_KEYS, checkOptions } from "../core/option-keys.js";
import { checkPayloadsFit } from "../core/packet.js";
import { countEnqueued } from "../core/telemetry.js";
import { checkKnownOptions, checkName, checkTenant, describe } from "../base/validate.js";

/** The job that runs once every item of a batch has ended; it reads how they ended with `ctx.batch()`. */
export interface BatchCallback {
  task: string;
  payload?: unknown;
  /** Default: the batch's tenant. */
  tenant?: string;
  group?: string;
  priority?: number;
  maxAttempts?: number;
}

export interface EnqueueBatchOptions {
  onComplete?: BatchCallback;
  /** Default queue of the items and the callback. Default "default". */
  queue?: string;
  /** The tenant of every item (an item may repeat it, not name another) and, by default, of the callback. */
  tenant?: string;
  db?: DbLike;
}

export interface EnqueuedBatch {
  batchId: number;
  /** The items' ids, in input order. */
  ids: number[];
  /** The callback's id, or null without `onComplete`. */
  callbackId: number | null;
}

const OPTION_KEYS = ["onComplete", "queue", "tenant", "db"];
const CALLBACK_KEYS = ["task", "payload", "tenant", "group", "priority", "maxAttempts"];
/** Ids per UPDATE that tags items with their batch (MariaDB expands a list in place). */
const TAG_CHUNK = 5000;

/**
 * Enqueues items and one callback job (`waiting`) in one transaction. The callback becomes
 * claimable exactly once, in the transaction that ends the batch's last item (done, failed or
 * cancelled: see flow-release.ts's finishBatch for how that is decided without a counter row
 * that every item's completion would wait on). An empty batch's callback is pending at once.
 */
export async function enqueueBatch(items: readonly EnqueueManyItem[], options: EnqueueBatchOptions = {}): Promise<EnqueuedBatch> {
  checkOptions(options, OPTION_KEYS, "enqueueBatch");
  if (!Array.isArray(items)) throw new JobError("enqueueBatch: items must be an array of { task, payload, ...options }", "items");
  const db = resolveDb(options.db);
  const queue = options.queue === undefined ? DEFAULT_QUEUE : checkName(options.queue, "queue");
  const tenant = checkTenant(options.tenant, "tenant", "a batch without a tenant");
  const jobs = items.map((item, i) => {
    if (!isItemShaped(item)) checkOptions(item, ENQUEUE_ITEM_KEYS, `enqueueBatch: items[${i}]`);
    for (const key of ["dependsOn", "ref", "onDependencyFailure"] as const) {
      if (item[key] !== undefined)
        throw new JobError(`items[${i}].${key}: a batch's items cannot have dependencies; use enqueueMany for a flow`, `items[${i}].${key}`);
    }
    if (item.sequence !== undefined) {
      throw new JobError(
        `items[${i}].sequence: a batch's items cannot be sequenced (a held item would keep its batch from ending); enqueue them with enqueueMany`,
        `items[${i}].sequence`,
      );
    }
    // A key could resolve to an existing job, which would then be counted in this batch.
    for (const key of ["idempotencyKey", "dedupKey", "throttle"] as const) {
      if (item[key]) {
        throw new JobError(
          `items[${i}].${key}: a batch's items cannot have keys (an existing job could stand in for one); make the whole batch idempotent in your own table`,
          `items[${i}].${key}`,
        );
      }
    }
    if (item.tenant !== undefined && item.tenant !== tenant) {
      throw new JobError(`items[${i}].tenant must be the batch's tenant (${JSON.stringify(tenant)}), got ${describe(item.tenant)}`, `items[${i}].tenant`);
    }
    return prepareJob(item.task, item.payload, { ...item, ...(tenant === null ? {} : { tenant }) }, queue, db.settings, i);
  });
  const callback = options.onComplete === undefined ? null : prepareCallback(options.onComplete, queue, tenant, db);
  if (db.dialect === "mysql") {
    await checkPayloadsFit(
      db,
      jobs.map((j) => j.payload),
      (i) => `items[${i}].payload`,
    );
  }
  const batch = await db.executor.transaction(async (tx) => {
    const batchId = await insertBatchRow(db, tx, tenant, jobs.length);
    let callbackId: number | null = null;
    if (callback) {
      [callbackId] = (await insertInTransaction(db, tx, [callback])) as [number];
      await tx.query(`UPDATE ${db.batchesTable} SET callback_id = $1 WHERE id = $2`, [callbackId, batchId]);
      if (jobs.length > 0) await tx.query(`UPDATE ${db.table} SET status = 'waiting' WHERE id = $1`, [callbackId]);
    }
    const ids = await insertInTransaction(db, tx, jobs);
    for (let from = 0; from < ids.length; from += TAG_CHUNK) {
      await tx.query(`UPDATE ${db.table} SET batch_id = $2 WHERE ${db.sql.inList("id", "$1")}`, [ids.slice(from, from + TAG_CHUNK), batchId]);
    }
    if (jobs.length === 0) {
      await tx.query(`UPDATE ${db.batchesTable} SET finished_at = ${db.sql.now} WHERE id = $1`, [batchId]);
      if (callbackId !== null) await releaseCallback(db, tx, callbackId);
    }
    return { batchId, ids, callbackId };
  });
  wakeLocal(db, new Set(jobs.map((j) => j.queue)));
  countEnqueued(callback ? [...jobs, callback] : jobs);
  return batch;
}

function prepareCallback(value: unknown, queue: string, tenant: string | null, db: JobsDatabase): NewJob {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new JobError(`enqueueBatch: onComplete must be { task, payload?, … }, got ${describe(value)}`, "onComplete");
  }
  checkKnownOptions(value, CALLBACK_KEYS, "enqueueBatch: onComplete");
  const spec = value as BatchCallback;
  const options = {
    queue,
    ...(spec.tenant !== undefined ? { tenant: spec.tenant } : tenant !== null ? { tenant } : {}),
    ...(spec.group !== undefined ? { group: spec.group } : {}),
    ...(spec.priority !== undefined ? { priority: spec.priority } : {}),
    ...(spec.maxAttempts !== undefined ? { maxAttempts: spec.maxAttempts } : {}),
  };
  const job = prepareJob(spec.task, spec.payload, options, queue, db.settings, null);
  if (job.tenant !== tenant)
    throw new JobError(`onComplete.tenant must be the batch's tenant (${JSON.stringify(tenant)}), got ${describe(spec.tenant)}`, "onComplete.tenant");
  return job;
}

async function insertBatchRow(db: JobsDatabase, tx: Executor, tenant: string | null, total: number): Promise<number> {
  const { rows } = await tx.query<{ id: number | string }>(`INSERT INTO ${db.batchesTable} (tenant, total) VALUES ($1, $2) RETURNING id`, [tenant, total]);
  return Number(rows[0]?.id);
}

function wakeLocal(db: JobsDatabase, queues: Set<string>): void {
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with .call(db.executor)
  const notify = db.executor.notify;
  if (notify) for (const queue of queues) notify.call(db.executor, db.channel, queue);
}
