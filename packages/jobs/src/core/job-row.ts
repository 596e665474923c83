import type { Dialect } from "../dialects/dialect.js";
import type { Job, JobStatus, JobStep } from "../base/types.js";
import { openJson, openText } from "../base/payload-codec.js";

/**
 * The one row codec of the jobs table: every read names its columns from here (adding a
 * column never changes what older code reads) and decodes them the same way on every backend.
 */

/** Database timestamps arrive as Date (pg, mysql2) or epoch milliseconds (SQLite, or a claim's epochMs). */
export function toDate(value: unknown): Date {
  if (value instanceof Date) return value;
  if (typeof value === "number" || typeof value === "bigint") return new Date(Number(value));
  if (typeof value === "string") return new Date(/^\d+(\.\d+)?$/.test(value) ? Number(value) : value);
  throw new TypeError(`not a timestamp: ${String(value)}`);
}

const dateOrNull = (value: unknown): Date | null => (value === null || value === undefined ? null : toDate(value));
/** Integers arrive as numbers, or as strings for BIGINT (pg, mysql2 supportBigNumbers). */
const number = (value: unknown): number => Number(value);
const text = (value: unknown): string => String(value);
const textOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : String(value));
/** Group and concurrency keys are stored as '' when absent (the claim's indexes find them by equality). */
const keyOrNull = (value: unknown): string | null => (value === null || value === undefined || value === "" ? null : String(value));
/** Booleans arrive as true/false (pg) or 1/0 (SQLite, MariaDB). */
const flag = (value: unknown): boolean => Boolean(Number(value));
const json = (value: unknown, sql: Dialect): unknown => sql.readJson(value);
/** Payloads, results and errors: opened with the database's payloadCodec when sealed (base/payload-codec.ts). */
const sealedJson = (value: unknown, sql: Dialect): unknown => openJson(sql.payloadCodec, sql.readJson(value));
const sealedTextOrNull = (value: unknown, sql: Dialect): string | null => openText(sql.payloadCodec, textOrNull(value));

type Decoder = (value: unknown, sql: Dialect) => unknown;
interface ColumnSpec {
  decode: Decoder;
  timestamp?: true;
  expression?: (column: (name: string) => string) => string;
}

/**
 * Per column: how it is decoded, whether it is a timestamp (read as epoch milliseconds where
 * asked), and the expression of a computed column.
 */
const COLUMNS = {
  id: { decode: number },
  queue: { decode: text },
  task: { decode: text },
  payload: { decode: sealedJson },
  status: { decode: (value: unknown) => String(value) as JobStatus },
  priority: { decode: number },
  attempts: { decode: number },
  max_attempts: { decode: number },
  last_error: { decode: sealedTextOrNull },
  run_at: { decode: toDate, timestamp: true },
  progress: { decode: json },
  result: { decode: sealedJson },
  tenant: { decode: textOrNull },
  idempotency_key: { decode: textOrNull },
  dedup_key: { decode: textOrNull },
  created_at: { decode: toDate, timestamp: true },
  updated_at: { decode: toDate, timestamp: true },
  finished_at: { decode: dateOrNull, timestamp: true },
  locked_until: { decode: dateOrNull, timestamp: true },
  heartbeat_at: { decode: dateOrNull, timestamp: true },
  started_at: { decode: dateOrNull, timestamp: true },
  locked_by: { decode: textOrNull },
  claim_token: { decode: text },
  trace_context: { decode: json },
  group_key: { decode: keyOrNull },
  concurrency_key: { decode: keyOrNull },
  snoozes: { decode: number },
  max_snoozes: { decode: number },
  batch_id: { decode: (value: unknown) => (value === null || value === undefined ? null : Number(value)) },
  has_dependents: { decode: flag },
  on_dependency_failure: { decode: textOrNull },
  /** Whether the run's attempt has been counted (a claimed job held unstarted has not). */
  started: { decode: flag, expression: (column: (name: string) => string) => `${column("started_at")} IS NOT NULL` },
} satisfies Record<string, ColumnSpec>;

export type JobColumn = keyof typeof COLUMNS;
/** A row of `columns`, decoded. */
export type DecodedRow<C extends JobColumn> = { [K in C]: ReturnType<(typeof COLUMNS)[K]["decode"]> };

export interface ColumnListOptions {
  /** Qualifies each column (`j` → `j.queue`). */
  alias?: string;
  /** Timestamps as epoch milliseconds, where the dialect reads those faster than its driver parses timestamps. */
  epochTimestamps?: boolean;
}

/** The SELECT (or RETURNING) list of `columns`, each under its own name. */
export function columnList(sql: Dialect, columns: readonly JobColumn[], options: ColumnListOptions = {}): string {
  const column = (name: string) => (options.alias ? `${options.alias}.${name}` : name);
  return columns
    .map((name) => {
      const spec: ColumnSpec = COLUMNS[name];
      if (spec.expression) return `${spec.expression(column)} AS ${name}`;
      if (spec.timestamp && options.epochTimestamps) {
        const read = sql.epochMs(column(name));
        return read === column(name) ? read : `${read} AS ${name}`;
      }
      return column(name);
    })
    .join(", ");
}

/** Decodes a row read with `columnList(sql, columns)`. */
export function decodeRow<C extends JobColumn>(sql: Dialect, columns: readonly C[], row: Record<string, unknown>): DecodedRow<C> {
  const decoded: Record<string, unknown> = {};
  for (const name of columns) decoded[name] = (COLUMNS[name] as ColumnSpec).decode(row[name], sql);
  return decoded as DecodedRow<C>;
}

/** What `getJob` reads. */
export const JOB_COLUMNS = [
  "id",
  "queue",
  "task",
  "payload",
  "status",
  "priority",
  "attempts",
  "max_attempts",
  "last_error",
  "run_at",
  "progress",
  "result",
  "tenant",
  "idempotency_key",
  "dedup_key",
  "created_at",
  "updated_at",
  "finished_at",
  "locked_until",
  "heartbeat_at",
  "started_at",
  "group_key",
  "concurrency_key",
  "snoozes",
  "max_snoozes",
  "batch_id",
  "has_dependents",
  "on_dependency_failure",
] as const satisfies readonly JobColumn[];

export function toJob(sql: Dialect, raw: Record<string, unknown>): Job {
  const row = decodeRow(sql, JOB_COLUMNS, raw);
  const base = {
    id: row.id,
    queue: row.queue,
    task: row.task,
    payload: row.payload,
    priority: row.priority,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    lastError: row.last_error,
    runAt: row.run_at,
    progress: row.progress,
    // Read apart from the row (jobs_progress): getJob fills it in.
    liveProgress: null,
    // Read apart from the row too (the steps and waits tables): getJob fills them in.
    steps: [] as JobStep[],
    waitingFor: null,
    result: row.result,
    tenant: row.tenant,
    idempotencyKey: row.idempotency_key,
    dedupKey: row.dedup_key,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    startedAt: row.started_at,
    group: row.group_key,
    concurrencyKey: row.concurrency_key,
    snoozes: row.snoozes,
    maxSnoozes: row.max_snoozes,
    // Filled in by getJob from the dependencies table (see flow-reads.ts).
    dependsOn: [] as number[],
    dependents: [] as number[],
    batchId: row.batch_id,
  };
  switch (row.status) {
    case "pending":
      return { ...base, status: "pending" };
    case "running":
      return { ...base, status: "running", lockedUntil: toDate(raw.locked_until), heartbeatAt: toDate(raw.heartbeat_at) };
    case "failed":
      return { ...base, status: "failed", finishedAt: row.finished_at ?? base.updatedAt, lastError: row.last_error ?? "" };
    case "done":
    case "cancelled":
      return { ...base, status: row.status, finishedAt: row.finished_at ?? base.updatedAt };
    case "waiting":
      return { ...base, status: "waiting" };
  }
}

/**
 * Every stored column of the jobs table, which jobs_history has too (migrations 8 and 14): what
 * the move of an ended job copies. A migration that adds a column to one adds it to both, and
 * here (schema-parity.test.ts compares this list with both tables on every backend).
 */
export const STORED_COLUMNS = [
  "id",
  "queue",
  "task",
  "payload",
  "status",
  "priority",
  "attempts",
  "max_attempts",
  "last_error",
  "run_at",
  "locked_until",
  "heartbeat_at",
  "claim_token",
  "locked_by",
  "progress",
  "result",
  "tenant",
  "idempotency_key",
  "dedup_key",
  "trace_context",
  "created_at",
  "updated_at",
  "finished_at",
  "started_at",
  "group_key",
  "concurrency_key",
  "snoozes",
  "max_snoozes",
  "deps_pending",
  "on_dependency_failure",
  "has_dependents",
  "batch_id",
  "due",
  "dead_letter",
  "awaited",
  "aging_base",
  "aging_every",
  "aging_max",
] as const;

export type StoredColumn = (typeof STORED_COLUMNS)[number];
