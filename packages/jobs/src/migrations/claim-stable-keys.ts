import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/**
 * Migration 26: MariaDB's scheduled and aging indexes keyed on columns a claim does not change.
 *
 * MariaDB has no partial index, so migrations 19 and 24 led `jobs_scheduled` and `jobs_aging`
 * with `status`: every claim (pending → running) then moved each plain job's entry in both, and
 * the plain path paid for options it does not use. Here each is keyed on a generated column
 * that holds its value only for the rows the partial index holds elsewhere, NULL otherwise, as
 * `pending_key` does for flow keys: `scheduled_at` (a plain pending job that is not due: its
 * run_at) and `aging_pending` (a pending job with priority aging: its step). A plain job's
 * values stay NULL from its insert to its end, and InnoDB leaves an index alone when its
 * columns keep their values. The reads name the columns (MariaDB uses an index on a generated
 * column only for a query that names it): run/due.ts, maintenance/age-priorities.ts.
 * PostgreSQL and SQLite keep their partial indexes; the version is recorded there with nothing to do.
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: () => [],
  sqlite: () => [],
  mysql: ({ table }) => [
    `ALTER TABLE ${table}
      ADD COLUMN IF NOT EXISTS scheduled_at DATETIME(6)
        AS (CASE WHEN status = 'pending' AND due = 0 AND group_key = '' AND concurrency_key = '' THEN run_at END) PERSISTENT,
      ADD COLUMN IF NOT EXISTS aging_pending INT AS (CASE WHEN status = 'pending' THEN aging_every END) PERSISTENT,
      DROP INDEX IF EXISTS jobs_scheduled,
      ADD INDEX jobs_scheduled (scheduled_at),
      DROP INDEX IF EXISTS jobs_aging,
      ADD INDEX jobs_aging (aging_pending)`,
  ],
};

/** Migration 26 for `dialect`. */
export function claimStableKeys(dialect: DialectName): Migration {
  return { version: 26, name: "claim_stable_keys", statements: statements[dialect] };
}
