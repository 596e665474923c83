import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { JobError } from "../base/errors.js";
import { insertStatement } from "./insert-statement.js";
import { findExisting, snapshotError, yieldToEndedKeys } from "./key-conflicts.js";
import { insertFlow, type InsertJobs } from "../dependencies/flow-enqueue.js";
import { readFlowPlan } from "../dependencies/flow-spec.js";
import { insertSequenced } from "../dependencies/sequence-enqueue.js";
import { readSequences } from "../dependencies/sequence-spec.js";
import { keyThrottledJobs } from "./throttle.js";
import { enqueueDebounced } from "./debounce.js";
import { hasKey, isItemShaped, prepareJob, type InsertedRow, type NewJob } from "./new-job.js";
import { DEFAULT_QUEUE, type EnqueueManyItem, type EnqueueManyOptions, type EnqueueOptions } from "../core/options.js";
import { ENQUEUE_ITEM_KEYS, ENQUEUE_MANY_OPTION_KEYS, ENQUEUE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { checkPayloadsFit } from "../core/packet.js";
import { isSerializationFailure } from "../core/sql-errors.js";
import { countEnqueued, withEnqueueSpan, type StoredTraceContext } from "../core/telemetry.js";
import { forDialect, groupsBySize, runSql, type PerDialect } from "../core/sql.js";
import type { PayloadOf } from "../base/types.js";
import { checkName } from "../base/validate.js";

export type { EnqueueManyItem, EnqueueManyOptions, EnqueueOptions, JobOptions } from "../core/options.js";

/** Bounded retry on the residual race: the winner can end, releasing its key, between our conflict and our re-read. */
const MAX_ENQUEUE_ATTEMPTS = 3;
/**
 * Jobs per INSERT. PostgreSQL takes one array per column; SQLite and MariaDB bind every value
 * (15 a row, 18 with priority aging; SQLite allows 32,766 parameters), and MariaDB's packet is bounded
 * (max_allowed_packet, 16 MiB by default), so its chunks are cut by payload size too.
 */
const CHUNK: PerDialect<{ rows: number; bytes: number }> = {
  postgres: { rows: 5000, bytes: Infinity },
  sqlite: { rows: 1800, bytes: Infinity },
  mysql: { rows: 1000, bytes: 4 * 1024 * 1024 },
};

/**
 * Enqueues a job and returns its id. With `db` set to a client inside your transaction, the
 * job becomes visible to workers only when you commit (transactional enqueue).
 */
export async function enqueue<T extends string>(task: T, payload?: PayloadOf<T>, options: EnqueueOptions = {}): Promise<number> {
  checkOptions(options, ENQUEUE_OPTION_KEYS, "enqueue");
  const db = resolveDb(options.db);
  const job = prepareJob(task, payload, options, DEFAULT_QUEUE, db.settings, null);
  const sequences = readSequences([options], ownField);
  if (db.dialect === "mysql") await checkPayloadsFit(db, [job.payload], () => "payload");
  const keying = keyThrottledJobs(db, [job]);
  if (keying) await keying;
  const plan = readFlowPlan([options], ownField);
  const [id] = await withEnqueueSpan(job.task, job.queue, 1, async (trace) => {
    if (job.debounce !== null) return [await enqueueDebounced(db, traced(job, trace), async (tx) => (await insertJobs(db, tx, [job], ownField))[0] as number)];
    if (sequences) return insertSequenced(db, [traced(job, trace)], sequences, inserter(db), ownField);
    return plan ? insertFlow(db, [traced(job, trace)], plan, inserter(db), ownField) : insertOne(db, traced(job, trace));
  });
  wakeLocalWorkers(db, [job]);
  countEnqueued([job]);
  return id as number;
}

/**
 * A job with an idempotency key is inserted in a transaction with its look-up in history
 * (yieldToEndedKeys), so that a job this call must yield to is never visible beside it. On an
 * application's SQLite handle with its own transaction open, the statements run in that
 * transaction as they are (it allows no pause before its first statement).
 */
function insertOne(db: JobsDatabase, job: NewJob): Promise<number[]> {
  if (job.idempotencyKey === null || db.executor.callerTransactionOpen?.()) return insertJobs(db, db.executor, [job], ownField);
  return db.executor.transaction((tx) => insertJobs(db, tx, [job], ownField));
}

/** Where the server cannot push (SQLite, MariaDB), the workers of this process hear of ready jobs directly. */
function wakeLocalWorkers(db: JobsDatabase, jobs: readonly NewJob[]): void {
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with .call(db.executor)
  const notify = db.executor.notify;
  if (!notify) return;
  for (const queue of new Set(jobs.filter((j) => j.delay === 0).map((j) => j.queue))) notify.call(db.executor, db.channel, queue);
}

function traced(job: NewJob, trace: StoredTraceContext | null): NewJob {
  if (trace) job.trace = JSON.stringify(trace);
  return job;
}

/** Enqueues many jobs, all or nothing, one round trip per chunk; ids come back in input order. */
export async function enqueueMany<T extends string>(items: readonly EnqueueManyItem<T>[], options: EnqueueManyOptions = {}): Promise<number[]> {
  checkOptions(options, ENQUEUE_MANY_OPTION_KEYS, "enqueueMany");
  if (!Array.isArray(items)) throw new JobError("enqueueMany: items must be an array of { task, payload, ...options }", "items");
  const db = resolveDb(options.db);
  const defaultQueue = options.queue === undefined ? DEFAULT_QUEUE : checkName(options.queue, "queue");
  const jobs = items.map((item, i) => {
    if (!isItemShaped(item)) checkOptions(item, ENQUEUE_ITEM_KEYS, `enqueueMany: items[${i}]`);
    return prepareJob(item.task, item.payload, item, defaultQueue, db.settings, i);
  });
  if (jobs.length === 0) return [];
  const sequences = readSequences(items, (i, name) => `items[${i}].${name}`);
  if (db.dialect === "mysql")
    await checkPayloadsFit(
      db,
      jobs.map((j) => j.payload),
      (i) => `items[${i}].payload`,
    );
  // Only when the clock must be read (a job is throttled, not on SQLite): an await before the
  // INSERT would let a caller's synchronous SQLite transaction end before the INSERT runs in it.
  const keying = keyThrottledJobs(db, jobs);
  if (keying) await keying;
  const first = jobs[0] as NewJob;
  const plan = readFlowPlan(items, (i, name) => `items[${i}].${name}`);
  if (plan && sequences) {
    throw new JobError("enqueueMany: a call with sequenced items cannot also hold a flow (dependsOn, ref); enqueue the flow in its own call", "sequence");
  }
  const ids = await withEnqueueSpan(first.task, first.queue, jobs.length, async (trace) => {
    for (const job of jobs) traced(job, trace);
    if (sequences) return insertSequenced(db, jobs, sequences, inserter(db), (i, name) => `items[${i}].${name}`);
    if (plan) return insertFlow(db, jobs, plan, inserter(db), (i, name) => `items[${i}].${name}`);
    const chunks = chunked(jobs, forDialect(CHUNK, db.dialect, "chunk size"));
    // One keyless statement is atomic by itself; key conflicts are resolved after the insert,
    // and one can still refuse the batch then (a key held by another tenant).
    if (chunks.length === 1 && !jobs.some(hasKey)) return insertJobs(db, db.executor, jobs, itemField(0));
    return insertAllOrNothing(db, chunks);
  });
  wakeLocalWorkers(db, jobs);
  countEnqueued(jobs);
  return ids;
}

const ownField: FieldName = (_index, field) => field;

/**
 * Inserts checked jobs on `executor`, already inside a transaction (a flow's, a batch's): one
 * statement per chunk, ids in input order. `offset` numbers the items in error messages.
 */
export async function insertInTransaction(db: JobsDatabase, executor: Executor, jobs: NewJob[], offset = 0): Promise<number[]> {
  const all: number[] = [];
  for (const chunk of chunked(jobs, forDialect(CHUNK, db.dialect, "chunk size")))
    all.push(...(await insertJobs(db, executor, chunk, itemField(offset + all.length))));
  return all;
}

function inserter(db: JobsDatabase): InsertJobs {
  return (tx, jobs) => insertInTransaction(db, tx, jobs);
}

function itemField(offset: number): FieldName {
  return (index, field) => `items[${offset + index}].${field}`;
}

/**
 * Every chunk in one transaction. On the caller's own connection that transaction is the
 * caller's (or none), which may still commit after our error: the rows this call inserted are
 * deleted before the error goes up. (Inside a transaction of ours the DELETE is rolled back
 * with the rest; where the server already rolled back, it finds nothing.)
 */
function insertAllOrNothing(db: JobsDatabase, chunks: NewJob[][]): Promise<number[]> {
  return db.executor.transaction(async (tx) => {
    const all: number[] = [];
    const inserted: number[] = [];
    try {
      for (const chunk of chunks) all.push(...(await insertJobs(db, tx, chunk, itemField(all.length), inserted)));
      return all;
    } catch (error) {
      for (let from = 0; from < inserted.length; from += 1000) {
        const ids = inserted.slice(from, from + 1000);
        const list = ids.map((_, i) => `$${i + 1}`).join(", ");
        await tx.query(`DELETE FROM ${db.table} WHERE id IN (${list})`, ids).catch(() => undefined);
      }
      throw error;
    }
  });
}

function chunked(jobs: NewJob[], limit: { rows: number; bytes: number }): NewJob[][] {
  return groupsBySize(jobs, { maxRows: limit.rows, maxBytes: limit.bytes }, (job) =>
    limit.bytes === Infinity ? 0 : Buffer.byteLength(job.payload ?? "") + 1024,
  );
}

/** How an error names a job's option: `dedupKey` for enqueue, `items[3].dedupKey` for enqueueMany. */
type FieldName = (index: number, field: string) => string;

/**
 * Inserts, then resolves conflicts: a keyed job that lost to an existing row gets that row's
 * id. Inserted rows get ids in input order (the sequence follows ORDER BY ord). The ids of
 * rows this call inserted are added to `inserted`, when given.
 */
async function insertJobs(db: JobsDatabase, executor: Executor, jobs: NewJob[], field: FieldName, inserted?: number[]): Promise<number[]> {
  const ids: (number | undefined)[] = new Array(jobs.length);
  const ours = new Map<number, number>();
  let pending = jobs.map((_, i) => i);
  for (let round = 0; round < MAX_ENQUEUE_ATTEMPTS && pending.length > 0; round++) {
    const batch = pending.map((i) => jobs[i] as NewJob);
    const statement = insertStatement(db, batch);
    const { rows } = await runSql<InsertedRow & { ids?: string | null }>(executor, statement.sql, statement.params, "insert").catch((error: unknown) => {
      if (!statement.keyless && isSerializationFailure(error, db.dialect)) throw snapshotError("idempotencyKey or dedupKey");
      throw error;
    });
    if (statement.keyless) {
      // Several jobs: one row holding the ids as an array; one job: its row.
      const text = rows[0]?.ids;
      const inserted = text === undefined ? rows.map((r) => r.id) : text ? text.slice(1, -1).split(",") : [];
      if (inserted.length !== batch.length) throw new Error(`enqueue: inserted ${inserted.length} of ${batch.length} keyless jobs`);
      pending.forEach((index, k) => (ids[index] = Number(inserted[k])));
    } else {
      assignInserted(batch, pending, rows, ids);
    }
    for (const i of pending) if (ids[i] !== undefined) ours.set(i, ids[i] as number);
    if (inserted) for (const i of pending) if (ids[i] !== undefined) inserted.push(ids[i] as number);
    const conflicted = pending.filter((i) => ids[i] === undefined);
    for (const i of conflicted) {
      const existing = await findExisting(db, executor, jobs[i] as NewJob, (name) => field(i, name));
      if (existing !== undefined) ids[i] = existing;
    }
    pending = pending.filter((i) => ids[i] === undefined);
  }
  if (pending.length > 0) {
    const name = field(pending[0] as number, "dedupKey");
    throw new JobError("enqueue: the job's key kept changing hands (its holder ended between our insert and our read); try again", name);
  }
  for (const [i, id] of await yieldToEndedKeys(db, executor, jobs, ours, field)) ids[i] = id;
  return ids as number[];
}

function assignInserted(batch: NewJob[], indexes: number[], rows: InsertedRow[], ids: (number | undefined)[]): void {
  const sorted = rows.map((r) => ({ ...r, id: Number(r.id) })).sort((a, b) => a.id - b.id);
  const byKey = new Map<string, number>();
  const keyless: number[] = [];
  for (const row of sorted) {
    if (row.idempotency_key !== null) byKey.set(`i:${row.idempotency_key}`, row.id);
    else if (row.dedup_key !== null) byKey.set(`d:${row.dedup_key}`, row.id);
    else keyless.push(row.id);
  }
  let next = 0;
  batch.forEach((job, k) => {
    const index = indexes[k] as number;
    if (job.idempotencyKey !== null || job.dedupKey !== null) {
      const key = job.idempotencyKey !== null ? `i:${job.idempotencyKey}` : `d:${job.dedupKey}`;
      const id = byKey.get(key);
      if (id !== undefined) {
        ids[index] = id;
        byKey.delete(key); // a second job with the same key in this batch conflicted: it re-reads
      }
    } else {
      ids[index] = keyless[next++];
    }
  });
}
