import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/** The table of debounce keys (`enqueue`'s `debounce` option), one row per key. */
export const DEBOUNCE_TABLE = "jobs_debounce";

/**
 * Migration 22: `jobs_debounce`, which job a debounce key last made (enqueue/debounce.ts). A
 * debounced enqueue locks its key's row first, so concurrent enqueues of one key take turns
 * (the last to commit leaves its payload); the job it names is reused while it is pending and
 * has never started, else a new job is made and named. The key frees once its job starts without
 * any write at the claim: the row is read together with the job's state. A table, not a column
 * of the jobs table: the key must stop counting when the job starts, which a unique index on
 * the jobs table could only say with a partial index, and MariaDB has none. `job_id` is null
 * only inside the transaction that made the row.
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ table, named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(DEBOUNCE_TABLE)} (debounce_key text PRIMARY KEY, job_id bigint)`,
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS dead_letter text`,
    `ALTER TABLE ${named("jobs_history")} ADD COLUMN IF NOT EXISTS dead_letter text`,
  ],
  sqlite: ({ table, named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(DEBOUNCE_TABLE)} (debounce_key TEXT PRIMARY KEY, job_id INTEGER) WITHOUT ROWID`,
    `ALTER TABLE ${table} ADD COLUMN dead_letter TEXT`,
    `ALTER TABLE ${named("jobs_history")} ADD COLUMN dead_letter TEXT`,
  ],
  mysql: ({ table, named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(DEBOUNCE_TABLE)} (debounce_key VARCHAR(255) NOT NULL PRIMARY KEY, job_id BIGINT)
      ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS dead_letter VARCHAR(255) NULL`,
    `ALTER TABLE ${named("jobs_history")} ADD COLUMN IF NOT EXISTS dead_letter VARCHAR(255) NULL`,
  ],
};

/**
 * Migration 22 also adds `dead_letter` to the live jobs table: the queue a job that fails for good
 * is routed to (run/dead-letter.ts), set at enqueue from the `deadLetter` option or the queue's
 * `jobDefaults`, so any process that settles the failure (a worker, the sweep, the CLI's
 * reclaim) routes it without configuration of its own. Null for most jobs. History has it too
 * (a stored column, core/job-row.ts): a failed job retried from history keeps its route.
 */
/** Migration 22 for `dialect`. */
export function debounceKeys(dialect: DialectName): Migration {
  return { version: 22, name: "debounce_keys_dead_letters", statements: statements[dialect] };
}
