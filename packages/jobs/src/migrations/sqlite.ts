import { runningWithoutLease } from "./lease-index.js";
import { durableSteps } from "./steps.js";
import { awaitedAndProgress } from "./progress.js";
import { priorityAging } from "./aging.js";
import { sequenceKeys } from "./sequences.js";
import { claimStableKeys } from "./claim-stable-keys.js";
import { eventWaits } from "./events.js";
import { dueFlag } from "./due.js";
import { debounceKeys } from "./debounce.js";
import { pausedQueues } from "./queues.js";
import { operatorViews } from "./operators.js";
import { liveJobsOnly } from "./history-store.js";
import { historyCounts } from "./history-counts.js";
import { dialectFor } from "../dialects/index.js";

const SQLITE = dialectFor("sqlite");
const SQLITE_NOW = SQLITE.now;
import { countsWithoutInLists, finishedCounts, finishedMinutes } from "./sqlite-counts.js";
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
  {
    version: 6,
    name: "dependencies_and_batches",
    // See migrations/postgres.ts version 6. SQLite cannot change a CHECK in place: the jobs
    // table is rebuilt (create, copy, drop, rename, indexes again), in the migration's
    // transaction; the AUTOINCREMENT high-water mark is carried over, so no id is reused.
    statements: ({ table, named, index, schema }) => {
      const on = table.slice(table.lastIndexOf(".") + 1);
      const rebuilt = named("jobs_v6");
      const sequence = `${schema ? `${schema}.` : ""}sqlite_sequence`;
      const columns =
        "id, queue, task, payload, status, priority, attempts, max_attempts, last_error, run_at, locked_until, heartbeat_at, claim_token, locked_by, " +
        "progress, result, tenant, idempotency_key, dedup_key, trace_context, created_at, updated_at, finished_at, started_at, group_key, concurrency_key, snoozes, max_snoozes";
      return [
        `CREATE TABLE ${rebuilt} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        queue TEXT NOT NULL,
        task TEXT NOT NULL,
        payload TEXT,
        status TEXT NOT NULL DEFAULT 'pending'
          CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled', 'waiting')),
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
        finished_at INTEGER,
        started_at INTEGER,
        group_key TEXT NOT NULL DEFAULT '',
        concurrency_key TEXT NOT NULL DEFAULT '',
        snoozes INTEGER NOT NULL DEFAULT 0,
        max_snoozes INTEGER NOT NULL DEFAULT 100 CHECK (max_snoozes >= 0),
        deps_pending INTEGER NOT NULL DEFAULT 0,
        on_dependency_failure TEXT CHECK (on_dependency_failure IN ('fail', 'cancel', 'run')),
        has_dependents INTEGER NOT NULL DEFAULT 0,
        batch_id INTEGER
      )`,
        `INSERT INTO ${rebuilt} (${columns}) SELECT ${columns} FROM ${table}`,
        `DELETE FROM ${sequence} WHERE name = 'jobs_v6'`,
        `INSERT INTO ${sequence} (name, seq) SELECT 'jobs_v6', seq FROM ${sequence} WHERE name = 'jobs'`,
        `DROP TABLE ${table}`,
        `ALTER TABLE ${rebuilt} RENAME TO ${on}`,
        `CREATE UNIQUE INDEX ${index("jobs_idempotency_key")} ON ${on} (idempotency_key) WHERE idempotency_key IS NOT NULL`,
        `CREATE UNIQUE INDEX ${index("jobs_dedup_key_active")} ON ${on} (dedup_key) WHERE dedup_key IS NOT NULL AND status IN ('pending', 'running')`,
        `CREATE INDEX ${index("jobs_running")} ON ${on} (locked_until) WHERE status = 'running'`,
        `CREATE INDEX ${index("jobs_finished")} ON ${on} (finished_at) WHERE status IN ('done', 'failed', 'cancelled')`,
        `CREATE INDEX ${index("jobs_tenant")} ON ${on} (tenant, id) WHERE tenant IS NOT NULL`,
        `CREATE INDEX ${index("jobs_claim_plain")} ON ${on} (queue, priority DESC, id) WHERE status = 'pending' AND group_key = '' AND concurrency_key = ''`,
        `CREATE INDEX ${index("jobs_flow_claim")} ON ${on} (queue, group_key, priority DESC, id) WHERE status = 'pending' AND (group_key <> '' OR concurrency_key <> '')`,
        `CREATE INDEX ${index("jobs_key_pending")} ON ${on} (concurrency_key) WHERE status = 'pending' AND concurrency_key <> ''`,
        `CREATE INDEX ${index("jobs_batch")} ON ${on} (batch_id, id) WHERE batch_id IS NOT NULL`,
        `CREATE TABLE IF NOT EXISTS ${named("jobs_dependencies")} (
          job_id INTEGER NOT NULL,
          depends_on_id INTEGER NOT NULL,
          PRIMARY KEY (job_id, depends_on_id)
        ) WITHOUT ROWID`,
        `CREATE INDEX IF NOT EXISTS ${index("jobs_dependents")} ON jobs_dependencies (depends_on_id, job_id)`,
        `CREATE TABLE IF NOT EXISTS ${named("jobs_batches")} (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          callback_id INTEGER,
          tenant TEXT,
          total INTEGER NOT NULL,
          created_at INTEGER NOT NULL DEFAULT (${SQLITE_NOW}),
          finished_at INTEGER
        )`,
        `CREATE INDEX IF NOT EXISTS ${index("jobs_batches_callback")} ON jobs_batches (callback_id)`,
      ];
    },
  },
  finishedCounts,
  {
    version: 8,
    name: "finished_history",
    // PostgreSQL's history table (range partitions by finished time) has no counterpart here:
    // SQLite prunes finished jobs by deleting them. The version is recorded all the same, so that
    // every backend's schema carries the same numbers.
    statements: () => [],
  },
  {
    version: 9,
    name: "failed_index",
    // See migrations/postgres.ts version 9.
    statements: ({ table, index }) => [
      `CREATE INDEX IF NOT EXISTS ${index("jobs_failed")} ON ${table.slice(table.lastIndexOf(".") + 1)} (id) WHERE status = 'failed'`,
    ],
  },
  finishedMinutes,
  {
    version: 11,
    name: "counts_without_in_lists",
    // See migrations/sqlite-counts.ts.
    statements: countsWithoutInLists,
  },
  {
    version: 12,
    name: "running_keys_index",
    // See migrations/postgres.ts version 12: SQLite updates rows in place and leaves no dead
    // entries, so jobs_running serves the count. Recorded all the same.
    statements: () => [],
  },
  {
    version: 13,
    name: "finished_index_without_in_list",
    // jobs_finished's predicate as comparisons (see the sqlite dialect's finished): a claim and a completion
    // tested each row they changed against `status IN ('done', 'failed', 'cancelled')` twice.
    statements: ({ table, index }) => [
      `DROP INDEX IF EXISTS ${index("jobs_finished")}`,
      `CREATE INDEX ${index("jobs_finished")} ON ${table.slice(table.lastIndexOf(".") + 1)} (finished_at) WHERE ${SQLITE.finished()}`,
    ],
  },
  liveJobsOnly("sqlite"),
  historyCounts("sqlite"),
  runningWithoutLease("sqlite"),
  operatorViews("sqlite"),
  durableSteps("sqlite"),
  dueFlag("sqlite"),
  eventWaits("sqlite"),
  pausedQueues("sqlite"),
  debounceKeys("sqlite"),
  awaitedAndProgress("sqlite"),
  priorityAging("sqlite"),
  sequenceKeys("sqlite"),
  claimStableKeys("sqlite"),
];
