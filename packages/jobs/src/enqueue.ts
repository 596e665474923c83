import { resolveDb, type DbLike } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import type { Executor } from "./db/executor.js";
import { mysqlNowPlus, refuseWarnings } from "./db/mysql.js";
import { sqliteNowPlus } from "./db/sqlite.js";
import { JobError } from "./errors.js";
import { checkPayloadsFit } from "./packet.js";
import { toJsonText } from "./payload.js";
import { findExisting, snapshotError } from "./key-conflicts.js";
import { isSerializationFailure } from "./sql-errors.js";
import { countEnqueued, withEnqueueSpan, type StoredTraceContext } from "./telemetry.js";
import { forDialect, runSql, valuesList, type PerDialect, type Script } from "./sql.js";
import type { PayloadOf } from "./types.js";
import { checkInteger, checkKnownOptions, checkName, checkOptionalKey, checkSeconds, checkTenant } from "./validate.js";

export interface JobOptions {
  /** Queue name. Default "default". */
  queue?: string;
  /** Total runs allowed (first run included). Default 1, as in the seed. */
  maxAttempts?: number;
  /** Seconds before the job may run. Default 0. */
  availableIn?: number;
  /** Larger runs first; PRIORITY_LOW/NORMAL/HIGH are -10/0/10. Default 0. */
  priority?: number;
  /** Same key → same job id, for as long as the row exists. Empty = no key. */
  idempotencyKey?: string;
  /** At most one pending-or-running job per key; free again once that job ends. */
  dedupKey?: string;
  /**
   * Owner of the job (the seed's org_id): tenant-scoped reads never see other tenants' jobs.
   * Leave it out for a job without a tenant; an empty or non-string tenant is a JobError.
   */
  tenant?: string;
}

export interface EnqueueOptions extends JobOptions {
  /** A database from connect(), a pool, or a client inside your own transaction. */
  db?: DbLike;
}

export interface EnqueueManyItem<T extends string = string> extends Omit<JobOptions, "queue"> {
  task: T;
  payload?: PayloadOf<T>;
  queue?: string;
}

export interface EnqueueManyOptions {
  queue?: string;
  db?: DbLike;
}

const JOB_OPTION_KEYS = ["queue", "maxAttempts", "availableIn", "priority", "idempotencyKey", "dedupKey", "tenant"] as const;
const ENQUEUE_KEYS = [...JOB_OPTION_KEYS, "db"];
const ITEM_KEYS = ["task", "payload", ...JOB_OPTION_KEYS];
const ITEM_KEY_SET = new Set(ITEM_KEYS);
/** Bounded retry on the residual race (seed): the winner can end, releasing its key, between our conflict and our re-read. */
const MAX_ENQUEUE_ATTEMPTS = 3;
/**
 * Jobs per INSERT. PostgreSQL takes one array per column; SQLite and MariaDB bind every value
 * (9 a row; SQLite allows 32,766 parameters), and MariaDB's packet is bounded
 * (max_allowed_packet, 16 MiB by default), so its chunks are cut by payload size too.
 */
const CHUNK: PerDialect<{ rows: number; bytes: number }> = {
  postgres: { rows: 5000, bytes: Infinity },
  sqlite: { rows: 2000, bytes: Infinity },
  mysql: { rows: 1000, bytes: 4 * 1024 * 1024 },
};
/** run_at must fit every backend's timestamps (MariaDB's DATETIME ends with year 9999). */
const MAX_DELAY_SECONDS = 1000 * 365.25 * 86400;

/** One validated row, ready to insert. */
interface NewJob {
  queue: string;
  task: string;
  payload: string | null;
  priority: number;
  maxAttempts: number;
  delay: number;
  tenant: string | null;
  idempotencyKey: string | null;
  dedupKey: string | null;
  /** JSON of the enqueuing span's context (OpenTelemetry), or null. */
  trace: string | null;
}

/**
 * A delay in seconds that every backend can add to its clock. Checked here, with the rest of
 * the input, for every dialect: on PostgreSQL a huge one used to reach the INSERT and come back
 * as the driver's "timestamp out of range" instead of a JobError.
 */
function checkDelay(value: unknown, field: string): number {
  const delay = checkSeconds(value, field);
  if (delay > MAX_DELAY_SECONDS) throw new JobError(`${field} must be at most ${MAX_DELAY_SECONDS} seconds (1000 years), got ${delay}`, field);
  return delay;
}

/** Task and queue names already checked: a bulk enqueue checks its one task name once. */
const checkedNames = new Set<string>();

function checkedName(value: unknown, field: () => string): string {
  if (typeof value === "string" && checkedNames.has(value)) return value;
  const name = checkName(value, field());
  if (checkedNames.size < 1000) checkedNames.add(name);
  return name;
}

/** `where` is the item's index in enqueueMany, or null; field names are built only for an error. */
function prepare(task: unknown, payload: unknown, options: JobOptions, defaultQueue: string, maxPayloadBytes: number, where: number | null): NewJob {
  const field = (name: string) => (where === null ? name : `items[${where}].${name}`);
  const json = toJsonText(payload, () => field("payload"));
  if (json !== null && json.length * 3 > maxPayloadBytes && Buffer.byteLength(json) > maxPayloadBytes) {
    throw new JobError(
      `${field("payload")} is ${Buffer.byteLength(json)} bytes of JSON; the limit is ${maxPayloadBytes} (store large data elsewhere and pass a reference, or raise maxPayloadBytes in connect())`,
      field("payload"),
    );
  }
  return {
    task: checkedName(task, () => field("task")),
    queue: options.queue === undefined ? defaultQueue : checkedName(options.queue, () => field("queue")),
    payload: json,
    priority: options.priority === undefined ? 0 : checkInteger(options.priority, field("priority"), -2_147_483_648),
    maxAttempts: options.maxAttempts === undefined ? 1 : checkInteger(options.maxAttempts, field("maxAttempts"), 1, 1_000_000),
    delay: options.availableIn === undefined ? 0 : checkDelay(options.availableIn, field("availableIn")),
    tenant: checkTenant(options.tenant, field("tenant"), "a job without a tenant"),
    idempotencyKey: options.idempotencyKey == null ? null : checkOptionalKey(options.idempotencyKey, field("idempotencyKey")),
    dedupKey: options.dedupKey == null ? null : checkOptionalKey(options.dedupKey, field("dedupKey")),
    trace: null,
  };
}

/** The usual item, checked without building its "items[i]" label (checkOptionsObject explains the rest). */
function isItemShaped(item: unknown): boolean {
  if (typeof item !== "object" || item === null || Array.isArray(item)) return false;
  for (const key in item) if (!ITEM_KEY_SET.has(key)) return false;
  return true;
}

function checkOptionsObject(options: unknown, allowed: readonly string[], where: string): void {
  if (typeof options !== "object" || options === null || Array.isArray(options)) {
    throw new JobError(`${where}: options must be an object, got ${Array.isArray(options) ? "an array" : typeof options}`, "options");
  }
  checkKnownOptions(options as object, allowed, where);
}

/**
 * Enqueues a job and returns its id. With `db` set to a client inside your transaction, the
 * job becomes visible to workers only when you commit (transactional enqueue).
 */
export async function enqueue<T extends string>(task: T, payload?: PayloadOf<T>, options: EnqueueOptions = {}): Promise<number> {
  checkOptionsObject(options, ENQUEUE_KEYS, "enqueue");
  const db = resolveDb(options.db);
  const job = prepare(task, payload, options, "default", db.settings.maxPayloadBytes, null);
  if (db.dialect === "mysql") await checkPayloadsFit(db, [job.payload], () => "payload");
  const [id] = await withEnqueueSpan(job.task, job.queue, 1, (trace) => insertJobs(db, db.executor, [traced(job, trace)], ownField));
  wakeLocalWorkers(db, [job]);
  countEnqueued([job]);
  return id as number;
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
  checkOptionsObject(options, ["queue", "db"], "enqueueMany");
  if (!Array.isArray(items)) throw new JobError("enqueueMany: items must be an array of { task, payload, ...options }", "items");
  const db = resolveDb(options.db);
  const defaultQueue = options.queue === undefined ? "default" : checkName(options.queue, "queue");
  const jobs = items.map((item, i) => {
    if (!isItemShaped(item)) checkOptionsObject(item, ITEM_KEYS, `enqueueMany: items[${i}]`);
    return prepare(item.task, item.payload, item, defaultQueue, db.settings.maxPayloadBytes, i);
  });
  if (jobs.length === 0) return [];
  if (db.dialect === "mysql") await checkPayloadsFit(db, jobs.map((j) => j.payload), (i) => `items[${i}].payload`);
  const first = jobs[0] as NewJob;
  const ids = await withEnqueueSpan(first.task, first.queue, jobs.length, async (trace) => {
    for (const job of jobs) traced(job, trace);
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

function itemField(offset: number): FieldName {
  return (index, field) => `items[${offset + index}].${field}`;
}

function hasKey(job: NewJob): boolean {
  return job.idempotencyKey !== null || job.dedupKey !== null;
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
  const chunks: NewJob[][] = [];
  let current: NewJob[] = [];
  let bytes = 0;
  for (const job of jobs) {
    const size = limit.bytes === Infinity ? 0 : Buffer.byteLength(job.payload ?? "") + 1024;
    if (current.length > 0 && (current.length >= limit.rows || bytes + size > limit.bytes)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(job);
    bytes += size;
  }
  chunks.push(current);
  return chunks;
}

interface InsertedRow {
  id: number | string;
  idempotency_key: string | null;
  dedup_key: string | null;
}

const INSERT_COLUMNS = "queue, task, payload, priority, max_attempts, run_at, tenant, idempotency_key, dedup_key, trace_context";

/** A column of the PostgreSQL insert: its value in a job, its SQL type, how the row uses it. */
interface PgColumn {
  value: (job: NewJob) => unknown;
  type: string;
  expr: (ref: string) => string;
}

const PG_COLUMNS: readonly PgColumn[] = [
  { value: (j) => j.queue, type: "text", expr: (r) => r },
  { value: (j) => j.task, type: "text", expr: (r) => r },
  { value: (j) => j.payload, type: "text", expr: (r) => `${r}::jsonb` },
  { value: (j) => j.priority, type: "int", expr: (r) => r },
  { value: (j) => j.maxAttempts, type: "int", expr: (r) => r },
  { value: (j) => j.delay, type: "float8", expr: (r) => `now() + make_interval(secs => ${r})` },
  { value: (j) => j.tenant, type: "text", expr: (r) => r },
  { value: (j) => j.idempotencyKey, type: "text", expr: (r) => r },
  { value: (j) => j.dedupKey, type: "text", expr: (r) => r },
  { value: (j) => j.trace, type: "text", expr: (r) => `${r}::jsonb` },
];
const PAYLOAD_COLUMN = 2;

/**
 * One PostgreSQL statement for one row or thousands: a NOTIFY per queue that has a job ready
 * now, ids out. A column whose value every job of the chunk shares (the queue, the task, the
 * priority… of a typical bulk enqueue) is sent once, as a scalar; only the others go in as
 * arrays for unnest — building, escaping and parsing arrays of identical values was a third
 * of a bulk insert's cost. ON CONFLICT only when a job has a key: without one no unique index
 * can conflict, and every row skips the speculative insertion. One job: no arrays at all.
 */
function pgInsert(db: JobsDatabase, jobs: readonly NewJob[]): { sql: string; params: unknown[]; keyless: boolean } {
  const params: unknown[] = [db.channel];
  const arrays: string[] = [];
  const names: string[] = [];
  const exprs = PG_COLUMNS.map((column, c) => {
    const first = column.value(jobs[0] as NewJob);
    const shared = c === PAYLOAD_COLUMN ? jobs.length === 1 : jobs.every((j) => column.value(j) === first);
    if (shared) {
      params.push(first);
      return column.expr(`$${params.length}::${column.type}`);
    }
    names.push(`c${c}`);
    if (c === PAYLOAD_COLUMN) {
      // Payloads are JSON text already: one JSON array of them is a join, where a text[]
      // literal escapes every quote of every payload (pg's escapeElement) and PostgreSQL
      // unescapes it again. A JSON null element is a job without payload (SQL NULL).
      params.push(`[${jobs.map((j) => j.payload ?? "null").join(",")}]`);
      arrays.push(`jsonb_array_elements($${params.length}::jsonb)`);
      return `NULLIF(v.c${c}, 'null'::jsonb)`;
    }
    params.push(jobs.map(column.value));
    arrays.push(`unnest($${params.length}::${column.type}[])`);
    return column.expr(`v.c${c}`);
  });
  const keyed = jobs.some((j) => j.idempotencyKey !== null || j.dedupKey !== null);
  const conflict = keyed ? "ON CONFLICT DO NOTHING" : "";
  if (arrays.length === 0) {
    // One job: a plain VALUES row and its NOTIFY inline (5–10% more single enqueues per second).
    // Without keys, only the id comes back; a job due now notifies, a delayed one does not.
    const job = jobs[0] as NewJob;
    // ($1, the channel, must appear in the statement either way, or it has no type.)
    const woke = job.delay === 0 ? "pg_notify($1, queue)" : "$1::text";
    const sql = keyed
      ? `
      WITH ins AS (
        INSERT INTO ${db.table} (${INSERT_COLUMNS}) VALUES (${exprs.join(", ")}) ${conflict}
        RETURNING id, queue, run_at <= now() AS ready, idempotency_key, dedup_key
      )
      SELECT id, idempotency_key, dedup_key, CASE WHEN ready THEN pg_notify($1, queue) END AS woke FROM ins`
      : `
      WITH ins AS (INSERT INTO ${db.table} (${INSERT_COLUMNS}) VALUES (${exprs.join(", ")}) RETURNING id, queue)
      SELECT id, ${woke} AS woke FROM ins`;
    return { sql, params, keyless: !keyed };
  }
  // Ids follow input order: the identity is drawn row by row, in ORDER BY ord.
  // ROWS FROM zips the arrays element by element, as a multi-argument unnest does.
  const source = `FROM ROWS FROM (${arrays.join(", ")}) WITH ORDINALITY AS v(${names.join(", ")}, ord) ORDER BY ord`;
  // Without keys nothing can conflict: every job gets a row, and the ids come back as one
  // array in id order (= input order) instead of a row each.
  const result = keyed
    ? "SELECT id, idempotency_key, dedup_key, (SELECT n FROM woke) AS woke FROM ins ORDER BY id"
    : "SELECT array_agg(id ORDER BY id)::text AS ids, (SELECT n FROM woke) AS woke FROM ins";
  const sql = `
    WITH ins AS (
      INSERT INTO ${db.table} (${INSERT_COLUMNS})
      SELECT ${exprs.join(", ")} ${source}
      ${conflict}
      RETURNING id, queue, run_at <= now() AS ready, idempotency_key, dedup_key
    ), woke AS (
      SELECT count(pg_notify($1, queue)) AS n FROM (SELECT DISTINCT queue FROM ins WHERE ready) r
    )
    ${result}`;
  return { sql, params, keyless: !keyed };
}

// PostgreSQL's is pgInsert. ON CONFLICT DO NOTHING without a target covers both key indexes.
const INSERT: Omit<PerDialect<(db: JobsDatabase, rows: number) => string | Script<InsertedRow>>, "postgres"> = {
  // Multi-row VALUES: rows are inserted, and numbered, in input order. ON CONFLICT DO NOTHING
  // without a target covers both key indexes (the dedup one is partial, as on PostgreSQL).
  sqlite: (db, rows) => `
    INSERT INTO ${db.table} (${INSERT_COLUMNS})
    VALUES ${valuesList(rows, 10, (p) => `(${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${sqliteNowPlus(p(6))}, ${p(7)}, ${p(8)}, ${p(9)}, ${p(10)})`)}
    ON CONFLICT DO NOTHING
    RETURNING id, idempotency_key, dedup_key`,
  // INSERT IGNORE … RETURNING returns the inserted rows only, like ON CONFLICT DO NOTHING
  // (ON DUPLICATE KEY UPDATE would return the existing rows too, hiding whose they are). IGNORE
  // would also turn bad data into warnings, so any warning besides the duplicates fails the
  // insert, inside a transaction that then rolls back.
  mysql: (db, rows) => (executor, params) =>
    executor.transaction(async (tx) => {
      const inserted = await tx.query<InsertedRow>(
        `INSERT IGNORE INTO ${db.table} (${INSERT_COLUMNS})
         VALUES ${valuesList(rows, 10, (p) => `(${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${mysqlNowPlus(p(6))}, ${p(7)}, ${p(8)}, ${p(9)}, ${p(10)})`)}
         RETURNING id, idempotency_key, dedup_key`,
        params,
      );
      await refuseWarnings(tx, rows - inserted.rows.length);
      return inserted;
    }),
};

function insertStatement(db: JobsDatabase, jobs: NewJob[]): { sql: string | Script<InsertedRow>; params: unknown[]; keyless?: boolean } {
  if (db.dialect === "postgres") return pgInsert(db, jobs);
  // SQLite, MariaDB: one row after the other, as valuesList numbers them.
  return {
    sql: INSERT[db.dialect](db, jobs.length),
    params: jobs.flatMap((j) => [j.queue, j.task, j.payload, j.priority, j.maxAttempts, j.delay, j.tenant, j.idempotencyKey, j.dedupKey, j.trace]),
  };
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
