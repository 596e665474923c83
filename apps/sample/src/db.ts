import { connect, migrate, type JobsDatabase } from "@forge/jobs";
import type { AppConfig } from "./config.js";
import { notificationTables } from "./notifications.js";
import { suppressionTables } from "./suppression.js";
import { flowTables } from "./flows.js";

/** The queue's executor: `$1…$n` SQL, rewritten for SQLite; one connection pool for the queue and the app. */
export type Sql = JobsDatabase["executor"];

/**
 * The app's database: the queue's tables and the app's own (imports, contacts) in one
 * database, so a business row and its job can be written in one transaction.
 */
export class AppDatabase {
  readonly imports: string;
  readonly contacts: string;

  constructor(readonly jobs: JobsDatabase) {
    if (jobs.dialect === "mysql") throw new Error("the sample app runs on SQLite or PostgreSQL (its own tables have no MariaDB migration)");
    this.imports = this.table("imports");
    this.contacts = this.table("contacts");
  }

  /** Quoted, schema-qualified like the queue's own table. */
  private table(name: string): string {
    return this.jobs.schema ? `"${this.jobs.schema}"."${name}"` : `"${name}"`;
  }

  get sql(): Sql {
    return this.jobs.executor;
  }

  /**
   * Runs `work` in one transaction; `jobs` is the queue bound to that transaction's
   * connection (`jobsDb.bind(client)`), so what it enqueues commits or rolls back with `sql`.
   */
  transaction<T>(work: (sql: Sql, jobs: JobsDatabase) => Promise<T>): Promise<T> {
    return this.jobs.executor.transaction((tx) => work(tx, this.jobs.bind(tx.raw)));
  }

  /** The SQL runner for the driver object a checkpoint hands to a handler's work (or the pool without one). */
  on(tx: unknown): Sql {
    return tx === undefined || tx === null ? this.jobs.executor : this.jobs.bind(tx).executor;
  }

  close(): Promise<void> {
    return this.jobs.close();
  }
}

export function openDatabase(config: Pick<AppConfig, "databaseUrl" | "databaseSchema">): AppDatabase {
  return new AppDatabase(connect(config.databaseUrl, config.databaseSchema ? { schema: config.databaseSchema } : {}));
}

const APP_TABLES: Record<"postgres" | "sqlite", (db: AppDatabase) => string[]> = {
  postgres: (db) => [
    `CREATE TABLE IF NOT EXISTS ${db.imports} (
      id uuid PRIMARY KEY,
      org text NOT NULL,
      file text NOT NULL,
      job_id bigint NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`,
    `CREATE TABLE IF NOT EXISTS ${db.contacts} (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      org text NOT NULL,
      email text NOT NULL,
      name text NOT NULL,
      age integer CHECK (age BETWEEN 0 AND 150),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (org, email)
    )`,
  ],
  sqlite: (db) => [
    `CREATE TABLE IF NOT EXISTS ${db.imports} (
      id TEXT PRIMARY KEY,
      org TEXT NOT NULL,
      file TEXT NOT NULL,
      job_id INTEGER NOT NULL,
      created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    )`,
    `CREATE TABLE IF NOT EXISTS ${db.contacts} (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      org TEXT NOT NULL,
      email TEXT NOT NULL,
      name TEXT NOT NULL,
      age INTEGER CHECK (age BETWEEN 0 AND 150),
      created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      UNIQUE (org, email)
    )`,
  ],
};

/**
 * The queue's migrations (`migrate()` of @forge/jobs), then the app's two tables. Idempotent:
 * run it at every start, from several processes at once if need be.
 */
export async function migrateApp(db: AppDatabase): Promise<void> {
  await migrate({ db: db.jobs });
  const dialect = db.jobs.dialect as "postgres" | "sqlite";
  await db.transaction(async (sql) => {
    // Two processes starting together would race on CREATE TABLE IF NOT EXISTS in PostgreSQL.
    if (dialect === "postgres") await sql.query("SELECT pg_advisory_xact_lock(hashtext('forge_sample_migrate'))");
    for (const statement of [...APP_TABLES[dialect](db), ...notificationTables(db), ...suppressionTables(db), ...flowTables(db, dialect)])
      await sql.query(statement);
  });
}
