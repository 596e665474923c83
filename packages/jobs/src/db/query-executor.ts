import { JobError } from "../base/errors.js";
import type { DialectName, Executor, QueryResult } from "./executor.js";
import { toQuestionMarks } from "./placeholders.js";
import { toSqliteValue } from "./sqlite.js";

/**
 * What an ORM's raw-SQL call may answer: an array of rows, `{ rows, rowCount }` (pg, Knex on
 * pg), Kysely's `{ rows, numAffectedRows }`, a write result (`{ affectedRows }`, `{ changes }`),
 * or mysql2's `[rows | header, fields]` pair (Drizzle and Knex on mysql2).
 */
export type QueryAnswer =
  | readonly unknown[]
  | {
      rows?: readonly unknown[];
      rowCount?: number | bigint | null;
      numAffectedRows?: number | bigint;
      affectedRows?: number;
      changes?: number | bigint;
    };

/** The seam between the queue and an ORM's transaction: see `fromQuery`. */
export interface QuerySource {
  /** The backend under the ORM; it decides the SQL the queue writes. */
  dialect: DialectName;
  /**
   * Runs one statement with its parameters in the ORM's transaction. `sql` has the placeholders
   * named by `placeholders`, `params` are in their order.
   */
  query(sql: string, params: unknown[]): Promise<QueryAnswer> | QueryAnswer;
  /**
   * For an ORM whose row-returning call does not report affected rows (Prisma's
   * `$queryRawUnsafe`): runs a statement that returns no rows and answers how many it changed.
   * Given, the queue calls it for every statement without a result set.
   */
  execute?(sql: string, params: unknown[]): Promise<number | bigint> | number | bigint;
  /**
   * `"$n"` (PostgreSQL's `$1 … $n`) or `"?"` (positional). Default: `"$n"` on PostgreSQL, `"?"`
   * elsewhere, what each driver takes. Knex wants `"?"` on every backend (it numbers them itself).
   */
  placeholders?: "$n" | "?";
}

const DIALECTS: readonly DialectName[] = ["postgres", "sqlite", "mysql"];

/** Statements that answer rows: the rest go to `execute` when the source has one. */
const RETURNS_ROWS = /^\s*(select|with|show|values|pragma)\b|\breturning\b/i;

/**
 * An executor over a caller's transaction that the queue reaches only through `query`: every
 * statement runs in it, nothing is opened or committed here (the ORM owns the transaction).
 */
export class QueryExecutor implements Executor {
  readonly dialect: DialectName;
  readonly pooled = false;

  constructor(readonly raw: QuerySource) {
    checkSource(raw);
    this.dialect = raw.dialect;
  }

  async query<R extends object>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
    const statement = bind(this.dialect, this.raw.placeholders, sql, params);
    try {
      if (this.raw.execute && !RETURNS_ROWS.test(sql)) {
        const count = await this.raw.execute(statement.sql, statement.params);
        return { rows: [], rowCount: Number(count) };
      }
      return toResult<R>(await this.raw.query(statement.sql, statement.params));
    } catch (error) {
      throw withDriverCode(error);
    }
  }

  /** Already inside the caller's transaction: a nested one would need savepoints the ORM may not know of. */
  transaction<T>(fn: (tx: Executor) => Promise<T>): Promise<T> {
    return fn(this);
  }

  async close(): Promise<void> {}
}

function checkSource(source: QuerySource): void {
  if (typeof source !== "object" || source === null) throw new JobError("fromQuery takes { dialect, query }", "source");
  if (!DIALECTS.includes(source.dialect)) {
    throw new JobError(`fromQuery: dialect must be "postgres", "sqlite" or "mysql", got ${JSON.stringify(source.dialect)}`, "dialect");
  }
  if (typeof source.query !== "function") throw new JobError("fromQuery: query must be a function (sql, params) => rows", "query");
  if (source.execute !== undefined && typeof source.execute !== "function") {
    throw new JobError("fromQuery: execute, when given, must be a function (sql, params) => affected rows", "execute");
  }
  if (source.placeholders !== undefined && source.placeholders !== "$n" && source.placeholders !== "?") {
    throw new JobError(`fromQuery: placeholders must be "$n" or "?", got ${JSON.stringify(source.placeholders)}`, "placeholders");
  }
}

/**
 * The queue's `$n` statement in the form the driver under the ORM takes, with values it can
 * bind: on MariaDB an array parameter becomes a list (`IN ($1)` reads `IN (?, ?)`), as the
 * queue's own mysql2 connection does; SQLite gets JSON text, booleans as 0/1, dates as epoch ms.
 */
function bind(dialect: DialectName, placeholders: "$n" | "?" | undefined, sql: string, params: readonly unknown[]): { sql: string; params: unknown[] } {
  const style = placeholders ?? (dialect === "postgres" ? "$n" : "?");
  if (dialect === "mysql") return expandLists(sql, params);
  const values = dialect === "sqlite" ? params.map(toSqliteValue) : params.map((v) => (v === undefined ? null : v));
  return style === "$n" ? { sql, params: values } : toQuestionMarks(sql, values);
}

function expandLists(sql: string, params: readonly unknown[]): { sql: string; params: unknown[] } {
  const values: unknown[] = [];
  const text = sql.replace(/\$(\d+)/g, (_m, n: string) => {
    const value = params[Number(n) - 1];
    if (!Array.isArray(value)) {
      values.push(value === undefined ? null : value);
      return "?";
    }
    values.push(...(value as unknown[]));
    return value.map(() => "?").join(", ");
  });
  return { sql: text, params: values };
}

function toResult<R>(answer: QueryAnswer): QueryResult<R> {
  if (Array.isArray(answer)) {
    if (isMysqlPair(answer)) return toResult<R>(answer[0] as QueryAnswer);
    return { rows: answer as R[], rowCount: answer.length };
  }
  if (typeof answer !== "object" || answer === null) {
    throw new Error(`fromQuery: query answered ${typeof answer}; it must answer the rows (an array) or { rows, rowCount }`);
  }
  const shape = answer as Exclude<QueryAnswer, readonly unknown[]>;
  const rows = (Array.isArray(shape.rows) ? shape.rows : []) as R[];
  const count = shape.rowCount ?? shape.numAffectedRows ?? shape.affectedRows ?? shape.changes;
  return { rows, rowCount: count === undefined || count === null ? rows.length : Number(count) };
}

/** mysql2's `[rows, fields]` or `[ResultSetHeader, undefined]`: rows are objects, never arrays, so this cannot be a result set. */
function isMysqlPair(answer: readonly unknown[]): boolean {
  if (answer.length !== 2) return false;
  const first = answer[0];
  return Array.isArray(first) || (typeof first === "object" && first !== null && typeof (first as { affectedRows?: unknown }).affectedRows === "number");
}

/**
 * ORMs wrap the driver's error (Drizzle's `cause`, TypeORM's `driverError`, Prisma's
 * `meta.driverAdapterError`); the queue reads the driver's code (a unique key, a snapshot too
 * old), so an error whose code sits deeper comes back with it on top, the ORM's as its cause.
 */
function withDriverCode(error: unknown): unknown {
  const found = driverCode(error);
  if (!found || found.holder === error) return error;
  const wrapped = new Error((error as Error).message ?? String(error), { cause: error }) as Error & { code?: unknown; errno?: unknown };
  wrapped.code = found.code;
  wrapped.errno = found.errno;
  return wrapped;
}

function driverCode(error: unknown): { holder: unknown; code: unknown; errno: unknown } | undefined {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0) {
    const e = queue.shift();
    if (typeof e !== "object" || e === null || seen.has(e)) continue;
    seen.add(e);
    const { code, errno, originalCode, cause, driverError, meta, clientVersion } = e as Record<string, unknown>;
    queue.push(cause, driverError, (meta as { driverAdapterError?: unknown } | undefined)?.driverAdapterError);
    // Prisma's own errors carry Prisma codes (P2010): the driver's is deeper.
    if (clientVersion !== undefined) continue;
    if (typeof originalCode === "string" || typeof originalCode === "number") {
      const numeric = /^\d+$/.test(String(originalCode));
      // Prisma's adapters: a SQLSTATE on PostgreSQL, a server errno on MariaDB.
      return { holder: e, code: originalCode, errno: numeric ? Number(originalCode) : undefined };
    }
    if (typeof errno === "number" || (typeof code === "string" && (/^[0-9A-Z]{5}$/.test(code) || code.startsWith("SQLITE_")))) {
      return { holder: e, code, errno };
    }
  }
  return undefined;
}
