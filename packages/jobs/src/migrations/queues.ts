import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/** The paused queues, one row per queue paused (maintenance/pause.ts writes it, worker/paused.ts reads it). */
export const QUEUES_TABLE = "jobs_queues";

/**
 * Migration 21: `jobs_queues`, a row per paused queue (pauseQueue inserts it, resumeQueue
 * deletes it), so a pause outlives every worker and connection. Workers read the whole table
 * once per poll interval and on a wake-up: it stays as small as the number of paused queues.
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(QUEUES_TABLE)} (
      queue text PRIMARY KEY,
      paused_at timestamptz NOT NULL DEFAULT now()
    )`,
  ],
  sqlite: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(QUEUES_TABLE)} (
      queue TEXT PRIMARY KEY,
      paused_at INTEGER NOT NULL
    ) WITHOUT ROWID`,
  ],
  mysql: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(QUEUES_TABLE)} (
      queue VARCHAR(255) NOT NULL PRIMARY KEY,
      paused_at DATETIME(6) NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
  ],
};

/** Migration 21 for `dialect`. */
export function pausedQueues(dialect: DialectName): Migration {
  return { version: 21, name: "paused_queues", statements: statements[dialect] };
}
