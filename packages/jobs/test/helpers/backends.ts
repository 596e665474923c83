import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, migrate, type JobsDatabase } from "../../src/index.js";
import { toQuestionMarks } from "../../src/db/placeholders.js";
import type { SqliteDatabase } from "../../src/db/sqlite.js";
import { sqlite as sqliteDialect } from "../../src/dialects/sqlite.js";
import { STORED_COLUMNS } from "../../src/core/job-row.js";

export const PG_URL = process.env.FORGE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
/**
 * Set with a FORGE_TEST_PG_URL through a transaction pooler (PgBouncer, `?pgbouncer=true`): the
 * direct URL the workers LISTEN on. Unset there, workers poll (as users without one do).
 */
export const PG_LISTEN_URL = process.env.FORGE_TEST_PG_LISTEN_URL || undefined;
export const MYSQL_URL = process.env.FORGE_TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test";

/** One backend of the conformance suite: every behavioural test runs once per entry. */
export interface Backend {
  name: "postgres" | "sqlite" | "mysql";
  /** A fresh, migrated, isolated queue (own schema / database / file) for one test file. */
  create(): Promise<TestDatabase>;
  /** An empty, unmigrated place for a queue (for migration tests), reachable from other processes. */
  blank(): Promise<{ url: string; schema: string | undefined; drop(): Promise<void> }>;
}

export interface TestDatabase {
  db: JobsDatabase;
  /** A URL that reaches the same queue from another process (CLI, child workers). */
  url: string;
  /** Extra connect() options for that URL (the schema). */
  schema: string | undefined;
  /** The database clock, as the queue sees it. */
  now(): Promise<Date>;
  /**
   * Raw SQL for assertions the API does not expose; `$1` placeholders. `{jobs}` names the live
   * table (pending, waiting, running), `{history}` the ended jobs' table, `{all}` both as one
   * relation of their stored columns, aliased `all_jobs` (`SELECT status FROM {all} WHERE id = $1`), or as named by `{all as j}`.
   */
  sql<R extends object = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  /**
   * Runs `fn` with the queue bound to a client inside a driver-native transaction that the
   * test opened itself, then commits or rolls back (transactional enqueue). `isolation` sets
   * the transaction's level (PostgreSQL, MariaDB; SQLite transactions are always serializable);
   * without it, the connection's own (READ COMMITTED on the queue's pools).
   */
  withTransaction<T>(fn: (bound: JobsDatabase) => Promise<T>, outcome: "commit" | "rollback", options?: TransactionOptions): Promise<T>;
  /** Quoted, qualified name for an application table next to the jobs table. */
  tableName(name: string): string;
  /** Runs SQL on the driver object that `checkpoint` hands to a handler's work function. */
  execOn(tx: unknown, text: string, params?: unknown[]): Promise<void>;
  close(): Promise<void>;
}

export interface TransactionOptions {
  isolation?: "read committed" | "repeatable read";
}

/** Every job, live or ended: the live table and history as one relation of their stored columns, named `alias`. */
export function allJobs(db: JobsDatabase, alias = "all_jobs"): string {
  const columns = STORED_COLUMNS.join(", ");
  return `(SELECT ${columns} FROM ${db.table} UNION ALL SELECT ${columns} FROM ${db.historyTable}) AS ${alias}`;
}

/** `{jobs}`, `{history}`, `{all}` and `{all as j}` in a test's SQL, for `db`. */
export function tableNames(db: JobsDatabase, text: string): string {
  return text
    .replace(/\{all as (\w+)\}/g, (_, alias: string) => allJobs(db, alias))
    .replaceAll("{all}", allJobs(db))
    .replaceAll("{history}", db.historyTable)
    .replaceAll("{jobs}", db.table);
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString("hex")}`;
}

/** A pooled client (pg) or connection (mysql2) of the test's own: BEGIN, `fn` with the queue bound to it, then COMMIT or ROLLBACK. */
async function inClientTransaction<T>(
  client: { query(sql: string): Promise<unknown>; release(): void },
  db: JobsDatabase,
  fn: (bound: JobsDatabase) => Promise<T>,
  outcome: "commit" | "rollback",
  begin: string,
): Promise<T> {
  try {
    await client.query(begin);
    const result = await fn(db.bind(client));
    await client.query(outcome === "commit" ? "COMMIT" : "ROLLBACK");
    return result;
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  } finally {
    client.release();
  }
}

const postgres: Backend = {
  name: "postgres",
  async blank() {
    const schema = uniqueName("blank");
    return {
      url: PG_URL,
      schema,
      drop: async () => {
        const db = connect(PG_URL);
        await db.executor.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await db.close();
      },
    };
  },
  async create() {
    const schema = uniqueName("t");
    const db = connect(PG_URL, { schema, poolSize: 20, ...(PG_LISTEN_URL ? { listenUrl: PG_LISTEN_URL } : {}) });
    await migrate({ db });
    return {
      db,
      url: PG_URL,
      schema,
      now: async () => (await db.executor.query<{ now: Date }>("SELECT now() AS now")).rows[0]!.now,
      sql: async (text, params) => (await db.executor.query(tableNames(db, text), params)).rows as never,
      withTransaction: async (fn, outcome, options) => {
        const begin = options?.isolation ? `BEGIN ISOLATION LEVEL ${options.isolation.toUpperCase()}` : "BEGIN";
        return inClientTransaction(await (db.executor.raw as import("pg").Pool).connect(), db, fn, outcome, begin);
      },
      tableName: (name) => `"${schema}"."${name}"`,
      execOn: async (tx, text, params) => {
        await (tx as import("pg").PoolClient).query(text, params);
      },
      close: async () => {
        // Keep the schema when a test failed? Dropping keeps the shared database small.
        await db.executor.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
        await db.close();
      },
    };
  },
};

/** A directory of its own per queue: the database file and its -wal / -shm companions. */
function sqliteFile(): { path: string; drop(): void } {
  const dir = mkdtempSync(join(tmpdir(), "forge-jobs-"));
  return { path: join(dir, "jobs.db"), drop: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A driver-native statement with `$n` placeholders, on whatever `checkpoint` hands out. */
function runOnSqlite(db: SqliteDatabase, text: string, params: unknown[] = []): void {
  const q = toQuestionMarks(text, params);
  db.prepare(q.sql).run(...q.params);
}

const sqlite: Backend = {
  name: "sqlite",
  async blank() {
    const file = sqliteFile();
    return { url: `sqlite:${file.path}`, schema: undefined, drop: async () => file.drop() };
  },
  async create() {
    const file = sqliteFile();
    const url = `sqlite:${file.path}`;
    const db = connect(url);
    await migrate({ db });
    return {
      db,
      url,
      schema: undefined,
      now: async () => new Date((await db.executor.query<{ now: number }>(`SELECT ${sqliteDialect.now} AS now`)).rows[0]!.now),
      sql: async (text, params) => (await db.executor.query(tableNames(db, text), params)).rows as never,
      withTransaction: async (fn, outcome) => {
        // The application's own connection to the same file, with its own transaction.
        const Database = (await import("better-sqlite3")).default;
        const app = new Database(file.path);
        try {
          app.exec("BEGIN IMMEDIATE");
          try {
            const result = await fn(db.bind(app));
            app.exec(outcome === "commit" ? "COMMIT" : "ROLLBACK");
            return result;
          } catch (error) {
            if (app.inTransaction) app.exec("ROLLBACK");
            throw error;
          }
        } finally {
          app.close();
        }
      },
      tableName: (name) => `"${name}"`,
      execOn: async (tx, text, params) => runOnSqlite(tx as SqliteDatabase, text, params),
      close: async () => {
        await db.close();
        file.drop();
      },
    };
  },
};

type MysqlPool = import("mysql2/promise").Pool;
type MysqlConnection = import("mysql2/promise").PoolConnection;

/** Runs one statement on a fresh connection to the server (outside any queue), e.g. DROP DATABASE. */
async function mysqlAdmin(statement: string): Promise<void> {
  const db = connect(MYSQL_URL);
  try {
    await db.executor.query(statement);
  } finally {
    await db.close();
  }
}

const mysql: Backend = {
  name: "mysql",
  async blank() {
    const schema = uniqueName("blank");
    return { url: MYSQL_URL, schema, drop: () => mysqlAdmin(`DROP DATABASE IF EXISTS \`${schema}\``) };
  },
  async create() {
    // A database of its own per test file (the `schema` option names a MariaDB database).
    const schema = uniqueName("t");
    const db = connect(MYSQL_URL, { schema, poolSize: 20 });
    await migrate({ db });
    const onConnection = async (connection: MysqlConnection, text: string, params: unknown[] = []) => {
      const q = toQuestionMarks(text, params);
      await connection.query(q.sql, q.params);
    };
    return {
      db,
      url: MYSQL_URL,
      schema,
      now: async () => (await db.executor.query<{ now: Date }>("SELECT UTC_TIMESTAMP(6) AS now")).rows[0]!.now,
      sql: async (text, params) => (await db.executor.query(tableNames(db, text), params)).rows as never,
      withTransaction: async (fn, outcome, options) => {
        const connection = await (db.executor.raw as MysqlPool).getConnection();
        // SET TRANSACTION (without SESSION) sets the level of the next transaction only.
        if (options?.isolation) await connection.query(`SET TRANSACTION ISOLATION LEVEL ${options.isolation.toUpperCase()}`);
        return inClientTransaction(connection, db, fn, outcome, "BEGIN");
      },
      tableName: (name) => `\`${schema}\`.\`${name}\``,
      execOn: (tx, text, params) => onConnection(tx as MysqlConnection, text, params),
      close: async () => {
        await db.executor.query(`DROP DATABASE IF EXISTS \`${schema}\``).catch(() => undefined);
        await db.close();
      },
    };
  },
};

const ALL: Backend[] = [postgres, sqlite, mysql];

/** The backends to run, from FORGE_TEST_BACKENDS (comma list) or all. */
export function backends(): Backend[] {
  const wanted = process.env.FORGE_TEST_BACKENDS?.split(",").map((s) => s.trim());
  return wanted ? ALL.filter((b) => wanted.includes(b.name)) : ALL;
}

/** Waits for a condition by polling, never a fixed sleep: fails with `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 10_000, everyMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A promise with its resolve function exposed, for tests that wait on signals. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
