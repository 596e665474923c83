import { retrying, type Backoff } from "../base/retry.js";
import { loadDriver } from "./driver.js";
import type { Executor, Listener, QueryResult, TransactionOptions } from "./executor.js";
import { databaseIdentity, listenLocally, notifyLocally } from "./local-wakeups.js";
import { SAVEPOINT_NAME, statementOn, transactionOn, type LentConnection } from "./lent-connection.js";
import { toQuestionMarks } from "./placeholders.js";

/** The parts of mysql2's promise API the queue uses (typed here so no d.ts needs mysql2's types). */
interface MysqlQueryable {
  query(options: { sql: string; values?: unknown[]; typeCast?: TypeCast }): Promise<[unknown, unknown]>;
}
interface MysqlConnection extends MysqlQueryable {
  release?(): void;
  destroy?(): void;
}
interface MysqlPool extends MysqlQueryable {
  getConnection(): Promise<MysqlConnection>;
  end(): Promise<void>;
}
interface CoreConnection {
  query(sql: string, callback: (error: Error | null) => void): unknown;
}
interface MysqlDriver {
  createPool(options: Record<string, unknown>): MysqlPool & { pool?: { on(event: "connection", listener: (c: CoreConnection) => void): unknown } };
}
type TypeCast = (field: { type: string; string(): string | null }, next: () => unknown) => unknown;

/** ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT: the server rolled back; running the transaction again is the documented remedy. */
const RETRYABLE_ERRNOS = new Set([1213, 1205]);
// Ten tries (about 2.5 s of backoff): under a storm of takeovers (every running job reclaimed
// again and again while their completions land) five in a row were seen to deadlock, and the
// completion reached the worker as an error to retry.
const MAX_ATTEMPTS = 10;

/** DATETIME columns hold UTC (see the dialect's clock): read them as UTC regardless of the pool's `timezone` option. */
const utcDates: TypeCast = (field, next) => {
  if (field.type === "DATETIME" || field.type === "TIMESTAMP") {
    const text = field.string();
    return text === null ? null : new Date(`${text.replace(" ", "T")}Z`);
  }
  return next();
};

export function isMysqlPool(db: unknown): boolean {
  return typeof db === "object" && db !== null && typeof (db as { getConnection?: unknown }).getConnection === "function";
}

export function isMysqlConnection(db: unknown): boolean {
  return (
    typeof db === "object" &&
    db !== null &&
    typeof (db as { beginTransaction?: unknown }).beginTransaction === "function" &&
    typeof (db as { execute?: unknown }).execute === "function"
  );
}

/** A deadlock victim or a lock wait timed out (1213, 1205): the transaction may run again as it was. */
export function isRetryable(error: unknown): boolean {
  return RETRYABLE_ERRNOS.has((error as { errno?: number } | null)?.errno ?? 0);
}

/** Deadlock victims retry soon, with jitter so the two sides do not collide again. */
const DEADLOCK_BACKOFF: Backoff = { firstMs: 20, maxMs: 500, jitter: true };
const retryDeadlocks = { backoff: DEADLOCK_BACKOFF, giveUp: (failures: number, error: unknown) => !isRetryable(error) || failures >= MAX_ATTEMPTS };

/**
 * `$n` → `?`, sent through mysql2's text protocol: an array parameter becomes a list
 * (`IN ($1)` with `$1 = [1, 2]` reads `IN (1, 2)`); callers never pass an empty one.
 */
async function run<R extends object>(on: MysqlQueryable, sql: string, params: readonly unknown[] | undefined): Promise<QueryResult<R>> {
  const q = toQuestionMarks(sql, params ?? []);
  const [result] = await on.query({ sql: q.sql, values: q.params, typeCast: utcDates });
  if (Array.isArray(result)) return { rows: result as R[], rowCount: result.length };
  return { rows: [], rowCount: Number((result as { affectedRows?: number }).affectedRows ?? 0) };
}

interface ConnectionConfig {
  host?: string;
  port?: number;
  socketPath?: string;
  database?: string;
}

/**
 * What makes two pools or connections the same database, for in-process wake-ups: server and
 * database from mysql2's config (a pool's, or a connection's).
 */
function mysqlIdentity(raw: object): string {
  return databaseIdentity(raw, () => {
    const holder = raw as {
      pool?: { config?: { connectionConfig?: ConnectionConfig } };
      connection?: { config?: ConnectionConfig };
      config?: ConnectionConfig;
    };
    const config = holder.pool?.config?.connectionConfig ?? holder.connection?.config ?? holder.config;
    return config?.database ? `mysql:${config.socketPath ?? `${config.host ?? "localhost"}:${config.port ?? 3306}`}/${config.database}` : undefined;
  });
}

/**
 * A connection: one of ours inside START TRANSACTION (`insideOurs`), or one lent to the queue
 * (the caller's, idle or inside its own transaction; a pooled session of ours).
 */
export class MysqlConnectionExecutor implements Executor {
  readonly dialect = "mysql" as const;
  readonly pooled = false;
  private readonly lent: LentConnection;

  constructor(
    readonly raw: MysqlConnection,
    private readonly insideOurs = false,
  ) {
    this.lent = { begin: (readOnly) => beginOn(raw, readOnly), run: (sql) => raw.query({ sql }) };
  }

  notify(channel: string, payload: string): void {
    notifyLocally(mysqlIdentity(this.raw), channel, payload);
  }

  query<R extends object>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    if (this.insideOurs) return run<R>(this.raw, sql, params);
    return statementOn(this.raw, () => run<R>(this.raw, sql, params));
  }

  transaction<T>(fn: (tx: Executor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    if (this.insideOurs) return fn(this); // our own START TRANSACTION is open on it: no nesting
    return transactionOn(this.raw, this.lent, () => fn(this), options?.readOnly ?? false);
  }

  async close(): Promise<void> {}
}

/** START TRANSACTION on an idle connection, a savepoint inside the caller's transaction. */
async function beginOn(connection: MysqlConnection, readOnly: boolean): Promise<"transaction" | "savepoint"> {
  const [rows] = await connection.query({ sql: "SELECT @@in_transaction AS open" });
  if (Number((rows as { open?: unknown }[])[0]?.open) === 1) {
    await connection.query({ sql: `SAVEPOINT ${SAVEPOINT_NAME}` });
    return "savepoint";
  }
  await connection.query({ sql: readOnly ? "START TRANSACTION READ ONLY" : "START TRANSACTION" });
  return "transaction";
}

export class MysqlPoolExecutor implements Executor {
  readonly dialect = "mysql" as const;
  readonly pooled = true;
  constructor(
    readonly raw: MysqlPool,
    private readonly owned: boolean,
  ) {}

  query<R extends object>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    // A single statement in autocommit: rolled back whole on a deadlock, so running it again is safe.
    return retrying(() => run<R>(this.raw, sql, params), retryDeadlocks);
  }

  transaction<T>(fn: (tx: Executor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    return retrying(() => this.once(fn, options), retryDeadlocks);
  }

  private async once<T>(fn: (tx: Executor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    const connection = await this.raw.getConnection();
    let broken = false;
    try {
      await connection.query({ sql: options?.readOnly ? "START TRANSACTION READ ONLY" : "START TRANSACTION" });
      const result = await fn(new MysqlConnectionExecutor(connection, true));
      await connection.query({ sql: "COMMIT" });
      return result;
    } catch (error) {
      await connection.query({ sql: "ROLLBACK" }).catch(() => {
        // A connection that cannot roll back must not go back to the pool half-open.
        broken = true;
      });
      throw error;
    } finally {
      if (broken) connection.destroy?.();
      else connection.release?.();
    }
  }

  /** One pooled connection, outside any transaction, for work that must stay on it (migrate's GET_LOCK). */
  async session<T>(fn: (session: Executor) => Promise<T>): Promise<T> {
    const connection = await this.raw.getConnection();
    try {
      return await fn(new MysqlConnectionExecutor(connection));
    } finally {
      connection.release?.();
    }
  }

  /** MariaDB has no LISTEN: workers of this process wake at once on an enqueue; others poll. */
  async listen(channel: string, onMessage: (payload: string) => void): Promise<Listener> {
    return listenLocally(mysqlIdentity(this.raw), channel, onMessage);
  }

  notify(channel: string, payload: string): void {
    notifyLocally(mysqlIdentity(this.raw), channel, payload);
  }

  async close(): Promise<void> {
    if (this.owned) await this.raw.end();
  }
}

/** Runs `fn` on one connection: a dedicated one from a pool, or the connection this executor already is. */
export function onOneConnection<T>(executor: Executor, fn: (session: Executor) => Promise<T>): Promise<T> {
  return executor instanceof MysqlPoolExecutor ? executor.session(fn) : fn(executor);
}

function loadMysql(): MysqlDriver {
  return loadDriver<MysqlDriver>("mysql2/promise", "mysql2@3", "The MariaDB backend");
}

/**
 * A mysql2/promise pool from a `mysql://` URL. Sessions run in UTC (mysql2 `timezone: 'Z'`
 * and `SET time_zone`) and READ COMMITTED, as PostgreSQL does: the claim's SKIP LOCKED then
 * takes no gap locks that would hold back concurrent enqueues.
 */
export function createMysqlExecutor(url: string, poolSize?: number): Executor {
  const mysql = loadMysql();
  // Options given here win over the URL's; without poolSize, `?connectionLimit=` (default 10) applies.
  const size = poolSize === undefined ? {} : { connectionLimit: poolSize };
  const pool = mysql.createPool({ uri: url, timezone: "Z", supportBigNumbers: true, ...size });
  pool.pool?.on("connection", (connection) => {
    // Queued ahead of any statement of ours on this connection; a failure shows on the next one.
    connection.query("SET time_zone = '+00:00'", () => undefined);
    connection.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", () => undefined);
  });
  return new MysqlPoolExecutor(pool, true);
}

/** The application's mysql2 pool (promise or callback API). */
export function wrapMysqlPool(db: unknown): Executor {
  return new MysqlPoolExecutor(promiseApi(db) as MysqlPool, false);
}

/** The application's mysql2 connection, inside its own transaction (transactional enqueue). */
export function wrapMysqlConnection(db: unknown): Executor {
  return new MysqlConnectionExecutor(promiseApi(db) as MysqlConnection);
}

/** mysql2's callback objects have `.promise()`; its promise objects do not. */
function promiseApi(db: unknown): unknown {
  const promise = (db as { promise?: unknown }).promise;
  return typeof promise === "function" ? (promise as () => unknown).call(db) : db;
}
