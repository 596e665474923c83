import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/**
 * Migration 14: the jobs table holds live jobs only (pending, waiting, running); the write that
 * ends a job moves its row into `jobs_history` in the same statement or transaction
 * (run/ended.ts). Every backend gets the same columns in both tables, so the move is an
 * `INSERT … SELECT` of the stored columns (core/job-row.ts, STORED_COLUMNS).
 *
 * PostgreSQL's history table exists since migration 8 (range partitions by finished time, so
 * retention drops a day); it gains the indexes the reads of ended jobs need. SQLite and
 * MariaDB get a plain table of the same columns: no CHECKs, no defaults (rows arrive whole),
 * no identity (the ids are the jobs'). Its indexes serve: a job by id (primary key), its
 * idempotency key (a key stays taken while its ended job is kept: enqueue looks here),
 * a batch's items, a tenant's jobs, the lists by status newest first, and retention by
 * finished time.
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ named, index }) => {
    const history = named("jobs_history");
    return [
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_key")} ON ${history} (idempotency_key) WHERE idempotency_key IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_batch")} ON ${history} (batch_id, id) WHERE batch_id IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_tenant")} ON ${history} (tenant, id) WHERE tenant IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_status")} ON ${history} (status, id)`,
      // Within a day's partition, the latest ended first (the dashboard's recent waits).
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_finished")} ON ${history} (finished_at)`,
    ];
  },
  sqlite: ({ named, index }) => {
    const history = named("jobs_history");
    // SQLite names the table of CREATE INDEX without its schema (the index's schema is the table's).
    const on = history.slice(history.lastIndexOf(".") + 1);
    return [
      `CREATE TABLE IF NOT EXISTS ${history} (
        id INTEGER PRIMARY KEY,
        queue TEXT NOT NULL,
        task TEXT NOT NULL,
        payload TEXT,
        status TEXT NOT NULL,
        priority INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        max_attempts INTEGER NOT NULL,
        last_error TEXT,
        run_at INTEGER NOT NULL,
        locked_until INTEGER,
        heartbeat_at INTEGER,
        claim_token TEXT,
        locked_by TEXT,
        progress TEXT,
        result TEXT,
        tenant TEXT,
        idempotency_key TEXT,
        dedup_key TEXT,
        trace_context TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        finished_at INTEGER,
        started_at INTEGER,
        group_key TEXT NOT NULL,
        concurrency_key TEXT NOT NULL,
        snoozes INTEGER NOT NULL,
        max_snoozes INTEGER NOT NULL,
        deps_pending INTEGER NOT NULL,
        on_dependency_failure TEXT,
        has_dependents INTEGER NOT NULL,
        batch_id INTEGER
      )`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_key")} ON ${on} (idempotency_key) WHERE idempotency_key IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_batch")} ON ${on} (batch_id, id) WHERE batch_id IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_tenant")} ON ${on} (tenant, id) WHERE tenant IS NOT NULL`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_status")} ON ${on} (status, id)`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_finished")} ON ${on} (finished_at)`,
    ];
  },
  // The stored columns of the jobs table only: its generated ones (dedup_active, neg_priority,
  // pending_key) serve the live table's indexes.
  mysql: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named("jobs_history")} (
      id BIGINT NOT NULL PRIMARY KEY,
      queue VARCHAR(255) NOT NULL,
      task VARCHAR(255) NOT NULL,
      payload LONGTEXT,
      status VARCHAR(16) NOT NULL,
      priority INT NOT NULL,
      attempts INT NOT NULL,
      max_attempts INT NOT NULL,
      last_error LONGTEXT,
      run_at DATETIME(6) NOT NULL,
      locked_until DATETIME(6),
      heartbeat_at DATETIME(6),
      claim_token CHAR(36),
      locked_by TEXT,
      progress LONGTEXT,
      result LONGTEXT,
      tenant VARCHAR(255),
      idempotency_key VARCHAR(255),
      dedup_key VARCHAR(255),
      trace_context LONGTEXT,
      created_at DATETIME(6) NOT NULL,
      updated_at DATETIME(6) NOT NULL,
      finished_at DATETIME(6),
      started_at DATETIME(6),
      group_key VARCHAR(191) NOT NULL,
      concurrency_key VARCHAR(191) NOT NULL,
      snoozes INT NOT NULL,
      max_snoozes INT NOT NULL,
      deps_pending INT NOT NULL,
      on_dependency_failure VARCHAR(16),
      has_dependents TINYINT(1) NOT NULL,
      batch_id BIGINT,
      KEY jobs_history_key (idempotency_key),
      KEY jobs_history_batch (batch_id, id),
      KEY jobs_history_tenant (tenant, id),
      KEY jobs_history_status (status, id),
      KEY jobs_history_finished (finished_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
  ],
};

/** Migration 14 for `dialect`. */
export function liveJobsOnly(dialect: DialectName): Migration {
  return { version: 14, name: "live_jobs_only", statements: statements[dialect] };
}
