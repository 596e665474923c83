import { existsSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import { JobError } from "./errors.js";
import { JobsDatabase, type DatabaseSettings } from "./db/database.js";
import type { DialectName, Executor } from "./db/executor.js";
import type { Logger } from "./logger.js";
import { checkIdentifier } from "./db/identifiers.js";
import { PgClientExecutor, PgPoolExecutor, createPgPool, isPgClient, isPgPool } from "./db/postgres.js";
import { isPrivateSqlite, isSqliteDatabase } from "./db/sqlite.js";
import { createSqliteExecutor, wrapSqliteDatabase } from "./db/sqlite-open.js";
import { createMysqlExecutor, isMysqlConnection, isMysqlPool, wrapMysqlConnection, wrapMysqlPool } from "./db/mysql.js";
import {
  CONNECT_OPTION_KEYS,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_MAX_RESULT_BYTES,
  DEFAULT_SQLITE_FILE,
  checkOptions,
  type ConnectOptions,
  type DbLike,
} from "./options.js";

export { DEFAULT_SQLITE_FILE } from "./options.js";
export type { ConnectOptions, DbLike } from "./options.js";

function byteLimit(value: number | undefined, fallback: number, field: string): number {
  const limit = value ?? fallback;
  if (!Number.isInteger(limit) || limit < 1) throw new JobError(`${field} must be a positive integer, got ${String(value)}`, field);
  return limit;
}

function settingsFrom(options: ConnectOptions, where: string): DatabaseSettings {
  checkOptions(options, CONNECT_OPTION_KEYS, where);
  return {
    schema: options.schema === undefined ? null : checkIdentifier(options.schema, "schema"),
    maxPayloadBytes: byteLimit(options.maxPayloadBytes, DEFAULT_MAX_PAYLOAD_BYTES, "maxPayloadBytes"),
    maxResultBytes: byteLimit(options.maxResultBytes, DEFAULT_MAX_RESULT_BYTES, "maxResultBytes"),
  };
}

function bindAny(client: unknown): Executor {
  if (isPgClient(client)) return new PgClientExecutor(client);
  if (isMysqlConnection(client)) return wrapMysqlConnection(client);
  if (isSqliteDatabase(client)) return wrapSqliteDatabase(client);
  throw new JobError("bind() takes a pg client, a mysql2 connection or a better-sqlite3 database", "db");
}

/**
 * The backend `connect(url)` opens, without opening anything (no URL: `DATABASE_URL`, then the
 * default SQLite file); null when no backend takes the URL.
 */
export function dialectOf(url?: string): DialectName | null {
  const target = url ?? process.env.DATABASE_URL ?? `sqlite:${DEFAULT_SQLITE_FILE}`;
  if (/^postgres(ql)?:\/\//i.test(target)) return "postgres";
  if (/^(mysql|mariadb):\/\//i.test(target)) return "mysql";
  if (/^sqlite:/i.test(target)) return "sqlite";
  return null;
}

/**
 * Opens a queue database from a URL: `postgres://…` / `postgresql://…`, `mysql://…` /
 * `mariadb://…`, or `sqlite:<path>` (`sqlite::memory:` for tests).
 */
export function connect(url?: string, options: ConnectOptions = {}): JobsDatabase {
  return open(url, options, false);
}

/**
 * `connect` for commands that only read (`forge-jobs status`, `doctor`): an SQLite database
 * must already exist and is opened read-only, so a mistyped path is an error naming it rather
 * than a new empty file.
 */
export function connectForReading(url?: string, options: ConnectOptions = {}): JobsDatabase {
  return open(url, options, true);
}

function open(url: string | undefined, options: ConnectOptions, readOnly: boolean): JobsDatabase {
  const target = url ?? defaultUrl();
  const settings = settingsFrom(options, "connect");
  const dialect = dialectOf(target);
  let executor: Executor;
  if (dialect === "postgres") {
    executor = new PgPoolExecutor(createPgPool(target, options.poolSize), true);
  } else if (dialect === "mysql") {
    executor = createMysqlExecutor(target.replace(/^mariadb:/i, "mysql:"), options.poolSize);
  } else if (dialect === "sqlite") {
    const path = target.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (!path) throw new JobError("sqlite URL needs a path: sqlite:./jobs.db or sqlite::memory:", "url");
    if (readOnly && !isPrivateSqlite(path) && !existsSync(path)) {
      throw new JobError(`no SQLite database at ${resolvePath(path)}: check the path (forge-jobs migrate creates the database)`, "url");
    }
    executor = createSqliteExecutor(path, { readOnly });
  } else {
    throw new JobError(
      `unsupported database URL ${JSON.stringify(redact(target))}: use postgres://, postgresql://, mysql://, mariadb:// or sqlite:<path>`,
      "url",
    );
  }
  return new JobsDatabase(executor, settings, bindAny);
}

/** Wraps a driver object the application already has, keeping one wrapper per object. */
export function fromDriver(db: object, options: ConnectOptions = {}): JobsDatabase {
  const settings = settingsFrom(options, "fromDriver");
  if (isPgPool(db)) return new JobsDatabase(new PgPoolExecutor(db, false), settings, bindAny);
  if (isPgClient(db)) return new JobsDatabase(new PgClientExecutor(db), settings, bindAny);
  if (isMysqlPool(db)) return new JobsDatabase(wrapMysqlPool(db), settings, bindAny);
  if (isMysqlConnection(db)) return new JobsDatabase(wrapMysqlConnection(db), settings, bindAny);
  if (isSqliteDatabase(db)) return new JobsDatabase(wrapSqliteDatabase(db), settings, bindAny);
  throw new JobError("db must be a database from connect(), a pg Pool or client, a mysql2 pool or connection, or a better-sqlite3 Database", "db");
}

const wrapped = new WeakMap<object, JobsDatabase>();
let defaultDatabase: JobsDatabase | undefined;

function defaultUrl(): string {
  return process.env.DATABASE_URL ?? `sqlite:${DEFAULT_SQLITE_FILE}`;
}

/** Which database the default connection opened, until a logger has been told (then null). */
let defaultUnannounced: { database: string; source: "DATABASE_URL" | "default SQLite file" } | null = null;

/**
 * Called with no `db`, a function opens `DATABASE_URL`, else the SQLite file `forge-jobs.db` in
 * the working directory. That stays (the contract's default), but said once: a process that
 * lost its DATABASE_URL would otherwise queue into a fresh local file, and its jobs look lost.
 * A library prints nothing unless given a logger, so it is said, at info level, through the
 * first logger that reaches this (a worker's, processOne's, drain's), once per opening.
 */
function announceDefault(logger: Logger | undefined): void {
  if (!defaultUnannounced || !logger) return;
  const { database, source } = defaultUnannounced;
  defaultUnannounced = null;
  logger.info({ database, source }, `@forge/jobs: no db given, using the default database ${database} (${source}); pass { db } to choose one`);
}

/** The queue database for a call's `db`; `logger`, when the caller has one, hears which default was opened. */
export function resolveDb(db: DbLike | undefined, logger?: Logger): JobsDatabase {
  if (db === undefined || db === null) {
    if (!defaultDatabase) {
      defaultDatabase = connect();
      const url = process.env.DATABASE_URL;
      defaultUnannounced =
        url === undefined ? { database: resolvePath(DEFAULT_SQLITE_FILE), source: "default SQLite file" } : { database: redact(url), source: "DATABASE_URL" };
    }
    announceDefault(logger);
    return defaultDatabase;
  }
  if (db instanceof JobsDatabase) return db;
  let found = wrapped.get(db);
  if (!found) {
    found = fromDriver(db);
    wrapped.set(db, found);
  }
  return found;
}

/** Closes the default connection opened from `DATABASE_URL` (or the default SQLite file). */
export async function closeDefaultDatabase(): Promise<void> {
  const db = defaultDatabase;
  defaultDatabase = undefined;
  await db?.close();
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, "//$1:***@");
}
