import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/** The table of sequence keys (`enqueue`'s `sequence` option), one row per key. */
export const SEQUENCES_TABLE = "jobs_sequences";

/**
 * Migration 25: strict order per key (`sequence`, dependencies/sequence-enqueue.ts).
 *
 * `jobs_sequences` names the last job enqueued with each key. An enqueue locks its key's row
 * and makes the new job depend on that job, so the jobs of a key run in the order their
 * enqueues commit. A table, not a column and an index on the hot jobs table: one row per key
 * (keys are unlimited), written only by the enqueues of sequenced jobs.
 *
 * `jobs_dependencies.holds` marks an edge whose failed dependency holds its dependent (the
 * `"hold"` policy): the dependent stays `waiting` until the failed job is retried and ends
 * done, or is cancelled. On the edge rather than in `on_dependency_failure`, whose CHECK
 * (migration 12) SQLite cannot change without rebuilding the jobs table.
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(SEQUENCES_TABLE)} (sequence_key text PRIMARY KEY, last_id bigint)`,
    `ALTER TABLE ${named("jobs_dependencies")} ADD COLUMN IF NOT EXISTS holds boolean NOT NULL DEFAULT false`,
  ],
  sqlite: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(SEQUENCES_TABLE)} (sequence_key TEXT PRIMARY KEY, last_id INTEGER) WITHOUT ROWID`,
    `ALTER TABLE ${named("jobs_dependencies")} ADD COLUMN holds INTEGER NOT NULL DEFAULT 0`,
  ],
  mysql: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(SEQUENCES_TABLE)} (sequence_key VARCHAR(191) NOT NULL PRIMARY KEY, last_id BIGINT)
      ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
    `ALTER TABLE ${named("jobs_dependencies")} ADD COLUMN IF NOT EXISTS holds TINYINT(1) NOT NULL DEFAULT 0`,
  ],
};

/** Migration 25 for `dialect`. */
export function sequenceKeys(dialect: DialectName): Migration {
  return { version: 25, name: "sequence_keys", statements: statements[dialect] };
}
