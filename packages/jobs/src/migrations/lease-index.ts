import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/**
 * Migration 16: no index of the live table holds a column that a start write or a lease
 * extension changes (locked_until, heartbeat_at, started_at, attempts, updated_at), so on
 * PostgreSQL those writes can be HOT updates (no index touched, the new row version on the same
 * page) and elsewhere they touch no index entry. The running jobs were indexed by their lease
 * (`jobs_running`), yet no query reads them in lease order: the reclaim tests every running
 * row's lease or heartbeat (a CASE), the counts group running jobs by queue. An index of the
 * running jobs by queue serves both, bounded by the running rows.
 *
 * PostgreSQL also leaves room in each page (fillfactor 70): a HOT update needs free space on
 * the row's own page, and a page filled by inserts has none.
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  // DROP INDEX finds an index by schema, not by table.
  postgres: ({ table, index, schema }) => [
    `CREATE INDEX IF NOT EXISTS ${index("jobs_running_queue")} ON ${table} (queue) WHERE status = 'running'`,
    `DROP INDEX IF EXISTS ${schema ? `${schema}.` : ""}${index("jobs_running")}`,
    `ALTER TABLE ${table} SET (fillfactor = 70)`,
  ],
  sqlite: ({ table, index }) => [
    // SQLite names the table of CREATE INDEX without its schema (the index's schema is the table's).
    `CREATE INDEX IF NOT EXISTS ${index("jobs_running_queue")} ON ${table.slice(table.lastIndexOf(".") + 1)} (queue) WHERE status = 'running'`,
    `DROP INDEX IF EXISTS ${index("jobs_running")}`,
  ],
  // InnoDB has no partial index: the key leads with status, as jobs_running did.
  mysql: ({ table }) => [`ALTER TABLE ${table} ADD KEY IF NOT EXISTS jobs_running_queue (status, queue), DROP KEY IF EXISTS jobs_running`],
};

/** Migration 16 for `dialect`. */
export function runningWithoutLease(dialect: DialectName): Migration {
  return { version: 16, name: "running_without_lease", statements: statements[dialect] };
}
