import { SQLITE_NOW } from "../dialects/sqlite.js";
import type { Migration } from "./types.js";

/** The jobs table of migrations/postgres.ts in SQLite: timestamps are epoch milliseconds (INTEGER), JSON is TEXT. */
export const sqliteMigrations: Migration[] = [
  {
    version: 1,
    name: "create_jobs",
    statements: ({ table, index }) => {
      // SQLite names the table of CREATE INDEX without its schema (the index's schema is the table's).
      const on = table.slice(table.lastIndexOf(".") + 1);
      return [
        `CREATE TABLE ${table} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        queue TEXT NOT NULL,
        task TEXT NOT NULL,
        payload TEXT,
        status TEXT NOT NULL DEFAULT 'pending'
          CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
        priority INTEGER NOT NULL DEFAULT 0,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL DEFAULT 1 CHECK (max_attempts >= 1),
        last_error TEXT,
        run_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW}),
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
        created_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW}),
        updated_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW}),
        finished_at INTEGER
      )`,
        // AUTOINCREMENT: an id is never reused after prune, as with PostgreSQL's identity.
        // NULLs are distinct in an SQLite unique index: jobs without a key never collide.
        `CREATE UNIQUE INDEX ${index("jobs_idempotency_key")} ON ${on} (idempotency_key) WHERE idempotency_key IS NOT NULL`,
        // dedup_key: one pending-or-running job per key (SQLite has partial indexes).
        `CREATE UNIQUE INDEX ${index("jobs_dedup_key_active")} ON ${on} (dedup_key) WHERE dedup_key IS NOT NULL AND status IN ('pending', 'running')`,
        `CREATE INDEX ${index("jobs_claim")} ON ${on} (queue, priority DESC, id) WHERE status = 'pending'`,
        `CREATE INDEX ${index("jobs_running")} ON ${on} (locked_until) WHERE status = 'running'`,
        `CREATE INDEX ${index("jobs_finished")} ON ${on} (finished_at) WHERE status IN ('done', 'failed', 'cancelled')`,
        `CREATE INDEX ${index("jobs_tenant")} ON ${on} (tenant, id) WHERE tenant IS NOT NULL`,
      ];
    },
  },
  {
    version: 2,
    name: "add_started_at",
    statements: ({ table }) => [`ALTER TABLE ${table} ADD COLUMN started_at INTEGER`],
  },
  {
    version: 3,
    name: "drop_recent_finished",
    // Early 0.1 builds created these two indexes here; no statement reads through them.
    statements: ({ index }) => ["jobs_recent_finished", "jobs_claim_token"].map((name) => `DROP INDEX IF EXISTS ${index(name)}`),
  },
  {
    version: 4,
    name: "flow_control",
    // See migrations/postgres.ts version 4 for each object's reason.
    statements: ({ table, index, named }) => {
      const on = table.slice(table.lastIndexOf(".") + 1);
      return [
        `ALTER TABLE ${table} ADD COLUMN group_key TEXT NOT NULL DEFAULT ''`,
        `ALTER TABLE ${table} ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT ''`,
        `ALTER TABLE ${table} ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0`,
        `ALTER TABLE ${table} ADD COLUMN max_snoozes INTEGER NOT NULL DEFAULT 100 CHECK (max_snoozes >= 0)`,
        `UPDATE ${table} SET group_key = tenant WHERE tenant IS NOT NULL AND tenant <> '' AND status IN ('pending', 'running')`,
        `DROP INDEX IF EXISTS ${index("jobs_claim")}`,
        `CREATE INDEX IF NOT EXISTS ${index("jobs_claim_plain")} ON ${on} (queue, priority DESC, id) WHERE status = 'pending' AND group_key = '' AND concurrency_key = ''`,
        `CREATE INDEX IF NOT EXISTS ${index("jobs_flow_claim")} ON ${on} (queue, group_key, priority DESC, id) WHERE status = 'pending' AND (group_key <> '' OR concurrency_key <> '')`,
        `CREATE INDEX IF NOT EXISTS ${index("jobs_key_pending")} ON ${on} (concurrency_key) WHERE status = 'pending' AND concurrency_key <> ''`,
        `CREATE TABLE IF NOT EXISTS ${named("jobs_limits")} (
          limit_key TEXT PRIMARY KEY,
          concurrency INTEGER CHECK (concurrency >= 0),
          rate_limit INTEGER CHECK (rate_limit >= 1),
          rate_per_seconds REAL CHECK (rate_per_seconds > 0),
          rate_burst INTEGER CHECK (rate_burst >= 1),
          updated_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW})
        )`,
        `CREATE TABLE IF NOT EXISTS ${named("jobs_groups")} (
          group_key TEXT PRIMARY KEY,
          weight INTEGER NOT NULL CHECK (weight >= 1),
          updated_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW})
        )`,
        `CREATE TABLE IF NOT EXISTS ${named("jobs_keys")} (
          concurrency_key TEXT PRIMARY KEY,
          tokens REAL NOT NULL,
          refilled_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW})
        )`,
      ];
    },
  },
  {
    version: 5,
    name: "schedules",
    // See migrations/postgres.ts version 5.
    statements: ({ named, index }) => {
      const on = named("jobs_schedules").slice(named("jobs_schedules").lastIndexOf(".") + 1);
      return [
        `CREATE TABLE IF NOT EXISTS ${named("jobs_schedules")} (
          name TEXT PRIMARY KEY,
          cron TEXT NOT NULL,
          timezone TEXT NOT NULL,
          task TEXT NOT NULL,
          payload TEXT,
          queue TEXT NOT NULL,
          tenant TEXT,
          catch_up TEXT NOT NULL CHECK (catch_up IN ('none', 'last', 'all')),
          catch_up_limit INTEGER NOT NULL CHECK (catch_up_limit >= 1),
          overlap TEXT NOT NULL CHECK (overlap IN ('allow', 'skip')),
          paused INTEGER NOT NULL DEFAULT 0,
          from_code INTEGER NOT NULL DEFAULT 0,
          definition TEXT NOT NULL,
          next_run_at INTEGER,
          last_run_at INTEGER,
          created_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW}),
          updated_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW})
        )`,
        `CREATE INDEX IF NOT EXISTS ${index("jobs_schedules_due")} ON ${on} (next_run_at) WHERE NOT paused`,
      ];
    },
  },
];
