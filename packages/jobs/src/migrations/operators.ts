import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";
import { ATTEMPTS_TABLE, WORKERS_TABLE } from "../core/database.js";

/**
 * Migration 17: what the dashboard's operator views read beside the jobs.
 *
 * `jobs_workers`: a worker writes its row when it starts, refreshes `heartbeat_at` at its lease
 * keeper's cadence (not per job) and deletes it on a clean stop; a row whose heartbeat is older
 * than its lease is a worker lost. The jobs it holds are counted from the jobs' `locked_by`.
 *
 * `jobs_attempts`: one row per attempt that ended and was followed by another (a failure with
 * attempts left, a lost worker's job reclaimed), written in the transaction that reschedules
 * the job. A job that succeeds at its first attempt writes nothing here: its only attempt is in
 * its own row. No primary key on (job_id, attempt): an attempt given back (shutdown, snooze)
 * is run again under its number, and a duplicate must never fail the write that records a
 * failure. The index serves the job page (one job's attempts) and pruning (by job).
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ named, index }) => [
    `CREATE TABLE IF NOT EXISTS ${named(WORKERS_TABLE)} (
      id text PRIMARY KEY,
      host text NOT NULL,
      pid integer NOT NULL,
      queues text NOT NULL,
      concurrency integer NOT NULL,
      lease_seconds double precision NOT NULL,
      started_at timestamptz NOT NULL,
      heartbeat_at timestamptz NOT NULL
    )`,
    `CREATE TABLE IF NOT EXISTS ${named(ATTEMPTS_TABLE)} (
      job_id bigint NOT NULL,
      attempt integer NOT NULL,
      started_at timestamptz,
      finished_at timestamptz NOT NULL,
      worker text,
      error text
    )`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_attempts_job")} ON ${named(ATTEMPTS_TABLE)} (job_id, attempt)`,
  ],
  sqlite: ({ named, index }) => {
    const attempts = named(ATTEMPTS_TABLE);
    return [
      `CREATE TABLE IF NOT EXISTS ${named(WORKERS_TABLE)} (
        id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        queues TEXT NOT NULL,
        concurrency INTEGER NOT NULL,
        lease_seconds REAL NOT NULL,
        started_at INTEGER NOT NULL,
        heartbeat_at INTEGER NOT NULL
      )`,
      `CREATE TABLE IF NOT EXISTS ${attempts} (
        job_id INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        started_at INTEGER,
        finished_at INTEGER NOT NULL,
        worker TEXT,
        error TEXT
      )`,
      // SQLite names the table of CREATE INDEX without its schema (the index's schema is the table's).
      `CREATE INDEX IF NOT EXISTS ${index("jobs_attempts_job")} ON ${attempts.slice(attempts.lastIndexOf(".") + 1)} (job_id, attempt)`,
    ];
  },
  mysql: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(WORKERS_TABLE)} (
      id VARCHAR(255) NOT NULL PRIMARY KEY,
      host VARCHAR(255) NOT NULL,
      pid INT NOT NULL,
      queues LONGTEXT NOT NULL,
      concurrency INT NOT NULL,
      lease_seconds DOUBLE NOT NULL,
      started_at DATETIME(6) NOT NULL,
      heartbeat_at DATETIME(6) NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
    `CREATE TABLE IF NOT EXISTS ${named(ATTEMPTS_TABLE)} (
      job_id BIGINT NOT NULL,
      attempt INT NOT NULL,
      started_at DATETIME(6),
      finished_at DATETIME(6) NOT NULL,
      worker TEXT,
      error LONGTEXT,
      KEY jobs_attempts_job (job_id, attempt)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
  ],
};

/** Migration 17 for `dialect`. */
export function operatorViews(dialect: DialectName): Migration {
  return { version: 17, name: "workers_and_attempts", statements: statements[dialect] };
}
