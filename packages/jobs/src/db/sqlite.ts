import { AsyncLocalStorage } from "node:async_hooks";
import { delay } from "../base/retry.js";
import { withBusyRetry } from "./sqlite-busy.js";
import { Turns } from "./turns.js";
import { resolve } from "node:path";
import type { Executor, Listener, QueryResult, TransactionOptions } from "./executor.js";
import { databaseIdentity, listenLocally, notifyLocally } from "./local-wakeups.js";
import { toQuestionMarks } from "./placeholders.js";
import { JobError } from "../base/errors.js";

/** The parts of a better-sqlite3 Database the queue uses (typed here so no d.ts needs @types/better-sqlite3). */
interface SqliteStatement {
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}

export interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  readonly inTransaction: boolean;
  readonly open: boolean;
  /** The path it was opened with (better-sqlite3), ":memory:" or "" for a private database. */
  readonly name?: string;
  close(): unknown;
}

const STATEMENT_CACHE_SIZE = 500;
/** The longest pause between two looks at whether the application's transaction has ended. */
const MAX_CALLER_WAIT_STEP_MS = 50;

export function isSqliteDatabase(db: unknown): db is SqliteDatabase {
  return (
    typeof db === "object" &&
    db !== null &&
    typeof (db as { prepare?: unknown }).prepare === "function" &&
    typeof (db as { pragma?: unknown }).pragma === "function"
  );
}

/**
 * One better-sqlite3 Database is one connection, shared by every executor wrapping it. While
 * one of our transactions is open on it (BEGIN … COMMIT spans awaits), statements from other
 * async flows wait their turn; statements from inside that transaction's own async context
 * (the transaction's work, a checkpoint's `work(tx)`) run in it. The context is tracked with
 * AsyncLocalStorage, so a handler enqueueing through `tx` inside a checkpoint does not deadlock.
 */
class Connection extends Turns {
  private readonly statements = new Map<string, SqliteStatement>();

  constructor(readonly db: SqliteDatabase) {
    super();
  }

  prepare(sql: string): SqliteStatement {
    let statement = this.statements.get(sql);
    if (statement) {
      // Least recently used goes first: re-insert on every hit.
      this.statements.delete(sql);
    } else {
      statement = this.db.prepare(sql);
      if (this.statements.size >= STATEMENT_CACHE_SIZE) this.statements.delete(this.statements.keys().next().value as string);
    }
    this.statements.set(sql, statement);
    return statement;
  }

  /** The statements of the transaction holding this connection may run now. */
  get insideHolder(): boolean {
    return this.held && holder.getStore() === this;
  }

  /** Resolves once nothing is queued or held (close). */
  async idle(): Promise<void> {
    (await this.acquire())();
  }
}

const holder = new AsyncLocalStorage<Connection>();
const connections = new WeakMap<object, Connection>();

function connectionFor(db: SqliteDatabase): Connection {
  let connection = connections.get(db);
  if (!connection) {
    connection = new Connection(db);
    connections.set(db, connection);
  }
  return connection;
}

/** better-sqlite3 binds numbers, strings, bigints, buffers and null; arrays travel as JSON (read them with json_each). */
export function toSqliteValue(value: unknown): unknown {
  if (value === undefined) return null;
  if (typeof value === "boolean") return value ? 1 : 0;
  if (value instanceof Date) return value.getTime();
  if (Array.isArray(value)) return JSON.stringify(value);
  return value;
}

/** What makes two connections the same database: the file's absolute path (an in-memory one is private). */
function sqliteIdentity(db: SqliteDatabase): string {
  return databaseIdentity(db, () => {
    const name = db.name;
    return name && !isPrivateSqlite(name) ? `file:${resolve(name)}` : undefined;
  });
}

/**
 * One writer turn per database file in this process. Several connections of one process on
 * one file (several JobsDatabase objects) would otherwise interleave their transactions at
 * `await` points: the second BEGIN IMMEDIATE then blocks the event loop in busy_timeout while
 * the first transaction, which holds the write lock, waits for that same loop to go on.
 */
const writerTurns = new Map<string, Turns>();

function fileTurns(db: SqliteDatabase): Turns {
  const identity = sqliteIdentity(db);
  let turns = writerTurns.get(identity);
  if (!turns) writerTurns.set(identity, (turns = new Turns()));
  return turns;
}

export class SqliteExecutor implements Executor {
  readonly dialect = "sqlite" as const;
  /** One connection, but safe to share: our transactions are serialised on it. The worker may use it. */
  readonly pooled = true;
  private readonly connection: Connection;

  /**
   * `joinsCallerTransaction`: inside a transaction the application has open on this handle,
   * statements run in it (transactional enqueue). The worker's view (`forWorker`) never does:
   * a claim there would run a job whose enqueue may yet roll back, and a completion would be
   * undone with it. It waits for the application's transaction to end instead.
   */
  constructor(
    readonly raw: SqliteDatabase,
    private readonly owned: boolean,
    private readonly joinsCallerTransaction = true,
  ) {
    this.connection = connectionFor(raw);
  }

  forWorker(): Executor {
    return this.joinsCallerTransaction ? new SqliteExecutor(this.raw, false, false) : this;
  }

  callerTransactionOpen(): boolean {
    return this.raw.inTransaction && !this.connection.held;
  }

  query<R extends object>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<R>> {
    const connection = this.connection;
    if (connection.insideHolder) return this.execute<R>(sql, params);
    if (!connection.held && (this.joinsCallerTransaction || !this.raw.inTransaction)) return this.execute<R>(sql, params);
    return this.queued<R>(sql, params);
  }

  /** After our transaction holding the connection (and, for the worker, the application's) has ended. */
  private async queued<R extends object>(sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
    for (let pause = 1; ; pause = Math.min(2 * pause, MAX_CALLER_WAIT_STEP_MS)) {
      const release = await this.connection.acquire();
      try {
        // Checked and run in one synchronous step: nothing can begin a transaction in between.
        if (this.joinsCallerTransaction || !this.raw.inTransaction) return await this.execute<R>(sql, params);
      } finally {
        release();
      }
      await delay(pause);
    }
  }

  private execute<R extends object>(sql: string, params: readonly unknown[]): Promise<QueryResult<R>> {
    const { sql: text, params: ordered } = toQuestionMarks(sql, params);
    const values = ordered.map(toSqliteValue);
    // A statement outside any transaction is its own transaction: safe to retry when busy.
    return withBusyRetry(() => {
      const statement = this.connection.prepare(text);
      if (statement.reader) {
        const rows = statement.all(...values) as R[];
        return { rows, rowCount: rows.length };
      }
      return { rows: [] as R[], rowCount: statement.run(...values).changes };
    }, !this.raw.inTransaction);
  }

  async transaction<T>(fn: (tx: Executor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    const connection = this.connection;
    const db = this.raw;
    if (connection.insideHolder) return fn(this); // nested: already in our transaction
    if (this.joinsCallerTransaction && !connection.held && db.inTransaction) {
      // The caller's own transaction (transactional enqueue): run in it, read-only if asked.
      const tx = inCallerTransaction(this, db);
      return options?.readOnly ? this.readOnly(() => fn(tx)) : fn(tx);
    }
    // The file's writer turn first, then the connection's: always in that order.
    const releaseFile = options?.readOnly ? undefined : await fileTurns(db).acquire();
    let release: () => void;
    try {
      release = await connection.acquire();
    } catch (error) {
      releaseFile?.();
      throw error;
    }
    // The worker's view waits for the application's transaction to end (better-sqlite3 has no
    // event for it: poll). Checked right before BEGIN, with nothing asynchronous in between.
    for (let pause = 1; !this.joinsCallerTransaction && db.inTransaction; pause = Math.min(2 * pause, MAX_CALLER_WAIT_STEP_MS)) {
      release();
      await delay(pause);
      release = await connection.acquire();
    }
    try {
      return await holder.run(connection, async () => {
        const work = async () => {
          // IMMEDIATE takes the write lock up front: a claim never meets SQLITE_BUSY half-way.
          await withBusyRetry(() => db.exec(options?.readOnly ? "BEGIN DEFERRED" : "BEGIN IMMEDIATE"), true);
          try {
            const result = await fn(this);
            await withBusyRetry(() => db.exec("COMMIT"), true);
            return result;
          } catch (error) {
            if (db.inTransaction) db.exec("ROLLBACK");
            throw error;
          }
        };
        return options?.readOnly ? this.readOnly(work) : work();
      });
    } finally {
      release();
      releaseFile?.();
    }
  }

  /** `query_only` for the duration: any write inside fails ("attempt to write a readonly database"). */
  private async readOnly<T>(work: () => Promise<T>): Promise<T> {
    const before = Number(this.raw.pragma("query_only", { simple: true }));
    this.raw.pragma("query_only = ON");
    try {
      return await work();
    } finally {
      this.raw.pragma(`query_only = ${before ? "ON" : "OFF"}`);
    }
  }

  /** Workers of this process on the same file wake at once on an enqueue; others poll. */
  async listen(channel: string, onMessage: (payload: string) => void): Promise<Listener> {
    return listenLocally(sqliteIdentity(this.raw), channel, onMessage);
  }

  notify(channel: string, payload: string): void {
    notifyLocally(sqliteIdentity(this.raw), channel, payload);
  }

  async close(): Promise<void> {
    if (!this.owned) return;
    await this.connection.idle();
    if (this.raw.open) this.raw.close();
  }
}

const CALLER_TRANSACTION_ENDED =
  "the transaction this call joined on the better-sqlite3 handle had ended before the call's statements could run: a synchronous " +
  "db.transaction(fn) (better-sqlite3's, Drizzle's) commits when fn returns, before any await resumes. Nothing of this call was written. " +
  "For a flow, a batch or a keyed or larger enqueueMany, open the transaction on the handle yourself " +
  '(exec("BEGIN IMMEDIATE"), await the call, exec("COMMIT")) or make the call outside the transaction';

/**
 * The caller's transaction as our `tx`. A synchronous one has ended by the time our first
 * `await` resumes: a write after that would land on its own, outside it (a flow's jobs after
 * the caller's ROLLBACK, or claimable before their dependencies are written), so it is refused.
 * The first statement waits one microtask too, so such a call writes nothing at all rather than
 * its first statement alone. A read only sees committed rows: it goes on.
 */
function inCallerTransaction(executor: SqliteExecutor, db: SqliteDatabase): Executor {
  let started = false;
  const tx: Executor = {
    dialect: "sqlite",
    raw: executor.raw,
    pooled: executor.pooled,
    query: async (sql, params) => {
      if (!started) {
        started = true;
        await Promise.resolve();
      }
      if (!db.inTransaction && !/^\s*select\b/i.test(sql)) throw new JobError(CALLER_TRANSACTION_ENDED);
      return executor.query(sql, params);
    },
    transaction: (fn, options) => executor.transaction(() => fn(tx), options),
    close: async () => {},
  };
  return tx;
}

/** An in-memory or temporary database: private to its connection, never a file on disk. */
export function isPrivateSqlite(path: string): boolean {
  return path === "" || path === ":memory:" || path.startsWith("file::memory:");
}
