import { resolveDb } from "../core/connect.js";
import { MIGRATIONS_TABLE, TABLE_NAME, type JobsDatabase } from "../core/database.js";
import { dialectFor } from "../dialects/index.js";
import { JobError } from "../base/errors.js";
import type { DialectName, Executor } from "../db/executor.js";
import { checkIdentifier, qualified, quoteIdent } from "../db/identifiers.js";
import { onOneConnection } from "../db/mysql.js";
import { mysqlMigrations } from "./mysql.js";
import { postgresMigrations } from "./postgres.js";
import { sqliteMigrations } from "./sqlite.js";
import type { Migration, SchemaNames } from "./types.js";
import { type DatabaseOptions } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";

const MIGRATIONS: Record<DialectName, Migration[]> = {
  postgres: postgresMigrations,
  sqlite: sqliteMigrations,
  mysql: mysqlMigrations,
};

/** Seconds a MariaDB migrate() waits for another process's migration before giving up. */
const MYSQL_LOCK_TIMEOUT_SECONDS = 120;

export interface MigrateResult {
  /** Versions applied by this call, in order (empty when the schema was current). */
  applied: number[];
  /** The schema version after the call. */
  version: number;
}

function migrationsFor(dialect: DialectName): Migration[] {
  return MIGRATIONS[dialect];
}

export function latestVersion(dialect: DialectName): number {
  return Math.max(...migrationsFor(dialect).map((m) => m.version));
}

function schemaNames(dialect: DialectName, schemaName: string | null): SchemaNames {
  const schema = schemaName ? quoteIdent(dialect, schemaName) : null;
  return {
    table: qualified(dialect, schemaName, TABLE_NAME),
    named: (name) => qualified(dialect, schemaName, name),
    schema,
    // PostgreSQL and SQLite put an index in the table's schema when the name is qualified
    // on CREATE INDEX (SQLite) or implicitly (PostgreSQL); MariaDB scopes names per table.
    index: (name) => (dialect === "sqlite" && schema ? `${schema}.${quoteIdent(dialect, name)}` : quoteIdent(dialect, name)),
  };
}

export interface MigrationSql {
  version: number;
  name: string;
  /** The version's statements, each ending in `;`. */
  sql: string;
}

/** The migration SQL for review (`forge-jobs init`), one statement per entry, with a header per version. */
export function migrationSql(db: JobsDatabase, fromVersion = 0): MigrationSql[] {
  return dialectMigrationSql(db.dialect, { schema: db.schema, fromVersion });
}

/** The same for a backend named directly, without a database to open (`forge-jobs init --dialect`). */
export function dialectMigrationSql(dialect: DialectName, options: { schema?: string | null; fromVersion?: number } = {}): MigrationSql[] {
  const schema = options.schema ? checkIdentifier(options.schema, "schema") : null;
  const names = schemaNames(dialect, schema);
  const migrationsTable = qualified(dialect, schema, MIGRATIONS_TABLE);
  return migrationsFor(dialect)
    .filter((m) => m.version > (options.fromVersion ?? 0))
    .map((m) => ({
      version: m.version,
      name: m.name,
      // Each file records its own version, as migrate() does: applied by another tool, the
      // schema is still known to doctor and migrate (they would otherwise apply it again).
      sql:
        [...m.statements(names), CREATE_MIGRATIONS_TABLE[dialect](migrationsTable), RECORD_VERSION[dialect](migrationsTable, m)]
          .map((s) => `${s};`)
          .join("\n\n") + "\n",
    }));
}

/** Records a version, once: the file may be applied after migrate() did it. Names are [a-z_]. */
const RECORD_VERSION: Record<DialectName, (t: string, m: Migration) => string> = {
  postgres: (t, m) => `INSERT INTO ${t} (version, name) VALUES (${m.version}, '${m.name}') ON CONFLICT (version) DO NOTHING`,
  sqlite: (t, m) => `INSERT OR IGNORE INTO ${t} (version, name, applied_at) VALUES (${m.version}, '${m.name}', ${dialectFor("sqlite").now})`,
  mysql: (t, m) => `INSERT IGNORE INTO ${t} (version, name) VALUES (${m.version}, '${m.name}')`,
};

/** Whether the jobs table exists (before its first migration is recorded: then it is not ours). */
const TABLE_EXISTS: Record<DialectName, (db: JobsDatabase) => { sql: string; params: unknown[] }> = {
  postgres: (db) => ({ sql: "SELECT to_regclass($1) IS NOT NULL AS found", params: [db.table] }),
  sqlite: (db) => ({
    sql: `SELECT count(*) > 0 AS found FROM ${db.schema ? `${quoteIdent("sqlite", db.schema)}.` : ""}sqlite_master WHERE type = 'table' AND name = $1`,
    params: [TABLE_NAME],
  }),
  mysql: (db) => ({
    sql: "SELECT count(*) > 0 AS found FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE($1, DATABASE()) AND TABLE_NAME = $2",
    params: [db.schema, TABLE_NAME],
  }),
};

async function foreignJobsTable(db: JobsDatabase, tx: Executor): Promise<boolean> {
  const { sql, params } = TABLE_EXISTS[db.dialect](db);
  const { rows } = await tx.query<{ found: unknown }>(sql, params);
  return rows[0]?.found === true || Number(rows[0]?.found) === 1;
}

const LOCKS: Record<DialectName, <T>(db: JobsDatabase, work: (tx: Executor) => Promise<T>) => Promise<T>> = {
  // One transaction, serialised by an advisory lock: PostgreSQL DDL is transactional, so
  // five processes migrating at once end with one schema, and a failure leaves none half-done.
  postgres: (db, work) =>
    db.executor.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`forge_jobs_migrate:${db.schema ?? ""}`]);
      if (db.schema) await tx.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent("postgres", db.schema)}`);
      return work(tx);
    }),
  // SQLite DDL is transactional too; BEGIN IMMEDIATE takes the file's write lock up front, so
  // concurrent migrators queue behind it (busy_timeout, then the executor's retries).
  sqlite: (db, work) => db.executor.transaction(work),
  // MariaDB DDL commits on its own: no transaction can hold a migration together. A named lock
  // on one dedicated connection serialises migrators instead (the lock belongs to that
  // session); each version is recorded right after its statements, which are idempotent.
  mysql: (db, work) =>
    onOneConnection(db.executor, async (session) => {
      const name = "CONCAT('forge_jobs_migrate:', MD5(COALESCE($1, DATABASE())))";
      const { rows } = await session.query<{ got: number | null }>(`SELECT GET_LOCK(${name}, $2) AS got`, [db.schema, MYSQL_LOCK_TIMEOUT_SECONDS]);
      if (Number(rows[0]?.got) !== 1) {
        throw new Error(`migrate: another process held the migration lock for over ${MYSQL_LOCK_TIMEOUT_SECONDS} s; is a migration stuck?`);
      }
      try {
        if (db.schema) await session.query(`CREATE DATABASE IF NOT EXISTS ${quoteIdent("mysql", db.schema)}`);
        return await work(session);
      } finally {
        // A migration that failed between its LOCK TABLES and UNLOCK TABLES (version 15) must
        // not hand its session back to the pool holding table locks.
        await session.query("UNLOCK TABLES").catch(() => undefined);
        // A lost connection released the lock with it: never hide work's own error behind that.
        await session.query(`SELECT RELEASE_LOCK(${name})`, [db.schema]).catch(() => undefined);
      }
    }),
};

const CREATE_MIGRATIONS_TABLE: Record<DialectName, (t: string) => string> = {
  postgres: (t) => `CREATE TABLE IF NOT EXISTS ${t} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
  sqlite: (t) => `CREATE TABLE IF NOT EXISTS ${t} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
  mysql: (t) =>
    `CREATE TABLE IF NOT EXISTS ${t} (version INT PRIMARY KEY, name VARCHAR(255) NOT NULL, applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))`,
};

/** Applies the pending migrations under the backend's lock and records each version. */
export async function migrate(options: DatabaseOptions = {}): Promise<MigrateResult> {
  checkOptions(options, DATABASE_OPTION_KEYS, "migrate");
  const db = resolveDb(options.db);
  const migrations = migrationsFor(db.dialect);
  const names = schemaNames(db.dialect, db.schema);
  return LOCKS[db.dialect](db, async (tx) => {
    // Before anything is created (MariaDB's DDL would commit on its own).
    if (await foreignJobsTable(db, tx)) {
      const recorded = await tx.query<{ version: number }>(`SELECT version FROM ${db.migrationsTable} WHERE version = 1`).catch(() => ({ rows: [] }));
      if (recorded.rows.length === 0) {
        const where = db.schema ? `schema ${JSON.stringify(db.schema)}` : "the connection's default schema";
        throw new JobError(
          `migrate: a table named "${TABLE_NAME}" already exists in ${where} and forge-jobs did not create it (no version is recorded in ${MIGRATIONS_TABLE}). ` +
            `Give the queue a schema of its own: connect(url, { schema: "forge" }), or --schema forge on the CLI; nothing was changed`,
          "schema",
        );
      }
    }
    await tx.query(CREATE_MIGRATIONS_TABLE[db.dialect](db.migrationsTable));
    const done = new Set((await tx.query<{ version: number }>(`SELECT version FROM ${db.migrationsTable}`)).rows.map((r) => Number(r.version)));
    const applied: number[] = [];
    for (const migration of migrations) {
      if (done.has(migration.version)) continue;
      for (const statement of migration.statements(names)) await tx.query(statement);
      await tx.query(
        `INSERT INTO ${db.migrationsTable} (version, name${db.dialect === "sqlite" ? ", applied_at" : ""}) VALUES ($1, $2${db.dialect === "sqlite" ? ", $3" : ""})`,
        db.dialect === "sqlite" ? [migration.version, migration.name, Date.now()] : [migration.version, migration.name],
      );
      applied.push(migration.version);
    }
    return { applied, version: Math.max(0, ...done, ...applied) };
  });
}

/** The applied schema version, or 0 when the queue was never migrated. Read-only. */
export async function schemaVersion(options: DatabaseOptions = {}): Promise<number> {
  checkOptions(options, DATABASE_OPTION_KEYS, "schemaVersion");
  const db = resolveDb(options.db);
  try {
    const { rows } = await db.executor.query<{ version: number | null }>(`SELECT max(version) AS version FROM ${db.migrationsTable}`);
    return Number(rows[0]?.version ?? 0);
  } catch {
    return 0;
  }
}
