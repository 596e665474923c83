import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve as resolvePath } from "node:path";
import { JobError } from "../base/errors.js";
import { JobsDatabase, type DatabaseSettings } from "./database.js";
import type { DialectName, Executor } from "../db/executor.js";
import type { Logger } from "../base/logger.js";
import { checkIdentifier } from "../db/identifiers.js";
import { PgClientExecutor, PgPoolExecutor, createPgPool, isPgClient, isPgPool, type PgMode } from "../db/postgres.js";
import { isPrivateSqlite, isSqliteDatabase } from "../db/sqlite.js";
import { createSqliteExecutor, wrapSqliteDatabase } from "../db/sqlite-open.js";
import { createMysqlExecutor, isMysqlConnection, isMysqlPool, wrapMysqlConnection, wrapMysqlPool } from "../db/mysql.js";
import { QueryExecutor, type QuerySource } from "../db/query-executor.js";
import { DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_RESULT_BYTES, DEFAULT_SQLITE_FILE, type ConnectOptions, type DbLike } from "./options.js";
import { CONNECT_OPTION_KEYS, checkOptions } from "./option-keys.js";
import { checkJobDefaults } from "./job-defaults.js";
import type { PayloadCodec } from "../base/payload-codec.js";

export { DEFAULT_SQLITE_FILE } from "./options.js";
export type { ConnectOptions, DbLike } from "./options.js";

function byteLimit(value: number | undefined, fallback: number, field: string): number {
  const limit = value ?? fallback;
  if (!Number.isInteger(limit) || limit < 1) throw new JobError(`${field} must be a positive integer, got ${String(value)}`, field);
  return limit;
}

function checkCodec(codec: unknown): PayloadCodec | null {
  if (codec === undefined) return null;
  const c = codec as Partial<PayloadCodec> | null;
  if (typeof c !== "object" || c === null || typeof c.encode !== "function" || typeof c.decode !== "function") {
    throw new JobError("payloadCodec must be an object with encode(text) and decode(text), e.g. aesGcmCodec({ keys, current })", "payloadCodec");
  }
  return c as PayloadCodec;
}

function settingsFrom(options: ConnectOptions, where: string): DatabaseSettings {
  checkOptions(options, CONNECT_OPTION_KEYS, where);
  return {
    schema: options.schema === undefined ? null : checkIdentifier(options.schema, "schema"),
    maxPayloadBytes: byteLimit(options.maxPayloadBytes, DEFAULT_MAX_PAYLOAD_BYTES, "maxPayloadBytes"),
    maxResultBytes: byteLimit(options.maxResultBytes, DEFAULT_MAX_RESULT_BYTES, "maxResultBytes"),
    jobDefaults: checkJobDefaults(options.jobDefaults, where),
    payloadCodec: checkCodec(options.payloadCodec),
  };
}

/**
 * The connection options of a PostgreSQL URL: behind a transaction pooler (declared, or
 * `pgbouncer=true` in the URL, Prisma's spelling), no named statements and LISTEN only through
 * `listenUrl`. A bad option is an error saying what to give.
 */
function pgModeOf(url: string | undefined, options: ConnectOptions): PgMode {
  const { pooler, listenUrl } = options;
  if (pooler !== undefined && pooler !== "none" && pooler !== "transaction") {
    throw new JobError(`pooler must be "none" or "transaction", got ${JSON.stringify(pooler)}`, "pooler");
  }
  if (listenUrl !== undefined && (typeof listenUrl !== "string" || dialectOf(listenUrl) !== "postgres")) {
    throw new JobError(`listenUrl must be a postgres:// or postgresql:// URL straight to the server, got ${describeUrl(listenUrl)}`, "listenUrl");
  }
  const pooled = pooler === undefined ? url !== undefined && /[?&]pgbouncer=true(&|$)/i.test(url) : pooler === "transaction";
  return { prepared: !pooled, listen: listenUrl !== undefined ? { url: listenUrl } : pooled ? null : "pool" };
}

/** PostgreSQL-only options given for another backend: an error, never silently ignored. */
function checkPgOnly(options: ConnectOptions, dialect: DialectName): void {
  for (const key of ["pooler", "listenUrl", "readUrl"] as const) {
    if (options[key] !== undefined && dialect !== "postgres") throw new JobError(`${key} is a PostgreSQL option; this database is ${dialect}`, key);
  }
}

/** The replica's executor for `readUrl` (PostgreSQL: streaming replicas, hot standbys). */
function replicaOf(dialect: DialectName, options: ConnectOptions): Executor | undefined {
  const { readUrl } = options;
  if (readUrl === undefined) return undefined;
  if (dialect !== "postgres") throw new JobError(`readUrl is a PostgreSQL option (a streaming replica); this database is ${dialect}`, "readUrl");
  if (typeof readUrl !== "string" || dialectOf(readUrl) !== "postgres") {
    throw new JobError(`readUrl must be a postgres:// or postgresql:// URL of a replica, got ${describeUrl(readUrl)}`, "readUrl");
  }
  // A replica never runs a worker: no LISTEN connection is ever opened to it.
  const mode = pgModeOf(readUrl, options);
  return new PgPoolExecutor(createPgPool(readUrl, options.poolSize, mode.prepared), true, { ...mode, listen: null });
}

function describeUrl(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(redact(value)) : typeof value;
}

/** A connection the caller lends: its session may keep generic plans, so no named statements (see PgMode). */
function bindAny(client: unknown): Executor {
  if (isPgClient(client)) return new PgClientExecutor(client, false, false);
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
  // Every option checked before anything is opened (an SQLite file is created on opening).
  const mode = pgModeOf(target, options);
  const replica = dialect === null ? undefined : checkedReplica(dialect, options);
  if (dialect === "postgres") {
    executor = new PgPoolExecutor(createPgPool(target, options.poolSize, mode.prepared), true, mode);
  } else if (dialect === "mysql") {
    executor = createMysqlExecutor(target.replace(/^mariadb:/i, "mysql:"), options.poolSize);
  } else if (dialect === "sqlite") {
    const path = target.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (!path) throw new JobError("sqlite URL needs a path: sqlite:./jobs.db or sqlite::memory:", "url");
    if (readOnly && !isPrivateSqlite(path) && !existsSync(path)) {
      throw new JobError(`no SQLite database at ${resolvePath(path)}: check the path (forge-jobs migrate creates the database)`, "url");
    }
    // SQLite creates the file, not its folder: `sqlite:data/app.db` in a fresh clone has no data/.
    if (!readOnly && !isPrivateSqlite(path)) mkdirSync(dirname(resolvePath(path)), { recursive: true });
    executor = createSqliteExecutor(path, { readOnly });
  } else {
    throw new JobError(
      `unsupported database URL ${JSON.stringify(redact(target))}: use postgres://, postgresql://, mysql://, mariadb:// or sqlite:<path>`,
      "url",
    );
  }
  return new JobsDatabase(executor, settings, bindAny, replica);
}

/** The queue on a driver object's executor, with the replica the options ask for. */
function withOptions(executor: Executor, settings: DatabaseSettings, options: ConnectOptions): JobsDatabase {
  return new JobsDatabase(executor, settings, bindAny, checkedReplica(executor.dialect, options));
}

function checkedReplica(dialect: DialectName, options: ConnectOptions): Executor | undefined {
  checkPgOnly(options, dialect);
  return replicaOf(dialect, options);
}

/** Wraps a driver object the application already has, keeping one wrapper per object. */
export function fromDriver(db: object, options: ConnectOptions = {}): JobsDatabase {
  const settings = settingsFrom(options, "fromDriver");
  // A pool made from a URL still says `pgbouncer=true` in it. The caller's connections keep
  // their own plan settings: no named statements on them (see PgMode).
  const mode = {
    ...pgModeOf(isPgPool(db) ? (db as { options?: { connectionString?: string } }).options?.connectionString : undefined, options),
    prepared: false,
  };
  if (isPgPool(db)) return withOptions(new PgPoolExecutor(db, false, mode), settings, options);
  if (isPgClient(db)) return withOptions(new PgClientExecutor(db, false, false), settings, options);
  if (isMysqlPool(db)) return withOptions(wrapMysqlPool(db), settings, options);
  if (isMysqlConnection(db)) return withOptions(wrapMysqlConnection(db), settings, options);
  if (isSqliteDatabase(db)) return withOptions(wrapSqliteDatabase(db), settings, options);
  throw new JobError("db must be a database from connect(), a pg Pool or client, a mysql2 pool or connection, or a better-sqlite3 Database", "db");
}

/**
 * The queue inside a transaction it did not open, an ORM's (Prisma, Drizzle, Kysely, Knex,
 * TypeORM…): `source.query(sql, params)` runs one statement in that transaction through the
 * ORM's raw-SQL call. The result is accepted as `db` everywhere (`enqueue`, `enqueueMany`,
 * `checkpointIn`…), and what the queue writes through it commits or rolls back with the ORM's
 * work. Make one per transaction: the ORM owns BEGIN, COMMIT and ROLLBACK.
 */
export function fromQuery(source: QuerySource, options: Omit<ConnectOptions, "poolSize"> = {}): JobsDatabase {
  return new JobsDatabase(new QueryExecutor(source), settingsFrom(options, "fromQuery"));
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
