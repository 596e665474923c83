import { migrate } from "@forge/jobs";
import type { AppDatabase } from "./db.js";
import { flowTables } from "./flows.js";
import { notificationTables } from "./notifications.js";
import { userTables } from "./onboarding.js";
import { suppressionTables } from "./suppression.js";

// Apart from db.ts: the schema names every feature's tables, and every feature takes the
// AppDatabase from db.ts, so the database itself must not know the features.

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
    for (const statement of [...APP_TABLES[dialect](db), ...notificationTables(db), ...suppressionTables(db), ...flowTables(db, dialect), ...userTables(db)])
      await sql.query(statement);
  });
}
