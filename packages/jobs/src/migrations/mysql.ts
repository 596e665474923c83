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
import { countTriggers, minutesFrom, minuteTriggers } from "./mysql-counts.js";
import { historyCounts } from "./history-counts.js";
import type { Migration } from "./types.js";

/**
 * The jobs table of migrations/postgres.ts in MariaDB (10.6+). MariaDB DDL commits on its
 * own, so each statement is idempotent (IF NOT EXISTS): a migration interrupted half-way
 * can simply be run again. Timestamps are DATETIME(6) in UTC; JSON is LONGTEXT.
 */
export const mysqlMigrations: Migration[] = [
  {
    version: 1,
    name: "create_jobs",
    statements: ({ table }) => [
      `CREATE TABLE IF NOT EXISTS ${table} (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        queue VARCHAR(255) NOT NULL,
        task VARCHAR(255) NOT NULL,
        payload LONGTEXT,
        status VARCHAR(16) NOT NULL DEFAULT 'pending'
          CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
        priority INT NOT NULL DEFAULT 0,
        attempts INT NOT NULL DEFAULT 0,
        max_attempts INT NOT NULL DEFAULT 1 CHECK (max_attempts >= 1),
        last_error LONGTEXT,
        run_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
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
        created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
        updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
        finished_at DATETIME(6),
        -- No partial indexes in MariaDB: the dedup key of an active job only, NULL otherwise,
        -- stored so that a UNIQUE index can hold it (NULLs are distinct).
        dedup_active VARCHAR(255) AS (CASE WHEN status IN ('pending', 'running') THEN dedup_key END) PERSISTENT,
        -- The claim's order is priority DESC, id ASC; an index on (-priority, id) walks it
        -- forwards, so LIMIT stops the scan (and the row locks) early. BIGINT: -(-2^31) fits.
        neg_priority BIGINT AS (-priority) VIRTUAL,
        UNIQUE KEY jobs_idempotency_key (idempotency_key),
        UNIQUE KEY jobs_dedup_key_active (dedup_active),
        -- The loser of a dedup race re-reads the winner by dedup_key (not dedup_active).
        KEY jobs_dedup_key (dedup_key),
        KEY jobs_claim (status, queue, neg_priority, id),
        KEY jobs_running (status, locked_until),
        -- Only here: the lease extension's locking read finds its rows by token (differences.ts).
        KEY jobs_claim_token (claim_token),
        KEY jobs_finished (status, finished_at),
        KEY jobs_tenant (tenant, id)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
      // utf8mb4_nopad_bin: keys and names compare byte for byte, case and trailing spaces
      // included, as on PostgreSQL and SQLite ("Key" ≠ "key", "k " ≠ "k").
    ],
  },
  {
    version: 2,
    name: "add_started_at",
    statements: ({ table }) => [
      `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS started_at DATETIME(6) NULL`,
      `CREATE INDEX IF NOT EXISTS jobs_recent_finished ON ${table} (queue, finished_at)`,
    ],
  },
  {
    version: 3,
    name: "drop_recent_finished",
    // No statement reads through (queue, finished_at): the dashboard and prune filter on
    // status first and use jobs_finished, and the index cost a write on every completion.
    statements: ({ table }) => [`DROP INDEX IF EXISTS jobs_recent_finished ON ${table}`],
  },
  {
    version: 4,
    name: "flow_control",
    // See migrations/postgres.ts version 4 for each object's reason. Without partial indexes,
    // the plain claim walks jobs_flow_claim with group_key = '' (equality on the index's prefix;
    // it runs only while no pending job of its queue has a group or a key), the fair claim with a group.
    statements: ({ table, named }) => [
      `ALTER TABLE ${table}
        ADD COLUMN IF NOT EXISTS group_key VARCHAR(191) NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS concurrency_key VARCHAR(191) NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS snoozes INT NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS max_snoozes INT NOT NULL DEFAULT 100 CHECK (max_snoozes >= 0)`,
      `UPDATE ${table} SET group_key = tenant WHERE tenant IS NOT NULL AND tenant <> '' AND status IN ('pending', 'running')`,
      `ALTER TABLE ${table} DROP INDEX IF EXISTS jobs_claim, ADD INDEX IF NOT EXISTS jobs_flow_claim (status, queue, group_key, neg_priority, id)`,
      // No partial index: the key of a pending job, NULL otherwise, indexed; finished jobs and
      // plain ones (NULL) sit apart from the range a probe reads.
      `ALTER TABLE ${table}
        ADD COLUMN IF NOT EXISTS pending_key VARCHAR(191) AS (CASE WHEN status = 'pending' AND concurrency_key <> '' THEN concurrency_key END) PERSISTENT,
        ADD INDEX IF NOT EXISTS jobs_key_pending (pending_key)`,
      `CREATE TABLE IF NOT EXISTS ${named("jobs_limits")} (
        limit_key VARCHAR(255) NOT NULL PRIMARY KEY,
        concurrency INT CHECK (concurrency >= 0),
        rate_limit INT CHECK (rate_limit >= 1),
        rate_per_seconds DOUBLE CHECK (rate_per_seconds > 0),
        rate_burst INT CHECK (rate_burst >= 1),
        updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
      `CREATE TABLE IF NOT EXISTS ${named("jobs_groups")} (
        group_key VARCHAR(191) NOT NULL PRIMARY KEY,
        weight INT NOT NULL CHECK (weight >= 1),
        updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
      `CREATE TABLE IF NOT EXISTS ${named("jobs_keys")} (
        concurrency_key VARCHAR(191) NOT NULL PRIMARY KEY,
        tokens DOUBLE NOT NULL,
        refilled_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
    ],
  },
  {
    version: 5,
    name: "schedules",
    // See migrations/postgres.ts version 5.
    statements: ({ named }) => [
      `CREATE TABLE IF NOT EXISTS ${named("jobs_schedules")} (
        name VARCHAR(191) NOT NULL PRIMARY KEY,
        cron VARCHAR(255) NOT NULL,
        timezone VARCHAR(255) NOT NULL,
        task VARCHAR(255) NOT NULL,
        payload LONGTEXT,
        queue VARCHAR(255) NOT NULL,
        tenant VARCHAR(255),
        catch_up VARCHAR(16) NOT NULL CHECK (catch_up IN ('none', 'last', 'all')),
        catch_up_limit INT NOT NULL CHECK (catch_up_limit >= 1),
        overlap VARCHAR(16) NOT NULL CHECK (overlap IN ('allow', 'skip')),
        paused BOOLEAN NOT NULL DEFAULT FALSE,
        from_code BOOLEAN NOT NULL DEFAULT FALSE,
        definition LONGTEXT NOT NULL,
        next_run_at DATETIME(6),
        last_run_at DATETIME(6),
        created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
        updated_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
        INDEX jobs_schedules_due (paused, next_run_at)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
    ],
  },
  {
    version: 6,
    name: "dependencies_and_batches",
    // See migrations/postgres.ts version 6. A column's CHECK belongs to its definition in
    // MariaDB: redefining the column (same type and default) replaces it.
    statements: ({ table, named }) => [
      `ALTER TABLE ${table} MODIFY COLUMN status VARCHAR(16) NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled', 'waiting'))`,
      `ALTER TABLE ${table}
        ADD COLUMN IF NOT EXISTS deps_pending INT NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS on_dependency_failure VARCHAR(16) CHECK (on_dependency_failure IN ('fail', 'cancel', 'run')),
        ADD COLUMN IF NOT EXISTS has_dependents BOOLEAN NOT NULL DEFAULT FALSE,
        ADD COLUMN IF NOT EXISTS batch_id BIGINT,
        ADD INDEX IF NOT EXISTS jobs_batch (batch_id, id)`,
      `CREATE TABLE IF NOT EXISTS ${named("jobs_dependencies")} (
        job_id BIGINT NOT NULL,
        depends_on_id BIGINT NOT NULL,
        PRIMARY KEY (job_id, depends_on_id),
        KEY jobs_dependents (depends_on_id, job_id)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
      `CREATE TABLE IF NOT EXISTS ${named("jobs_batches")} (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        callback_id BIGINT,
        tenant VARCHAR(255),
        total INT NOT NULL,
        created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
        finished_at DATETIME(6),
        KEY jobs_batches_callback (callback_id)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
    ],
  },
  {
    version: 7,
    name: "finished_counts",
    // See migrations/postgres-counts.ts, version 7; the shard is CONNECTION_ID() % COUNT_SHARDS.
    // DDL commits on its own here: rows that finish while the backfill reads may be counted
    // once more or less (the backfill writes shard -1, so running it again replaces, not adds).
    statements: ({ table, named }) => {
      const counts = named("jobs_counts");
      return [
        `CREATE TABLE IF NOT EXISTS ${counts} (
          queue VARCHAR(255) NOT NULL,
          tenant VARCHAR(255) NOT NULL DEFAULT '',
          status VARCHAR(16) NOT NULL CHECK (status IN ('done', 'failed', 'cancelled')),
          shard INT NOT NULL,
          n BIGINT NOT NULL DEFAULT 0,
          PRIMARY KEY (queue, tenant, status, shard)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
        ...countTriggers(table, counts, named),
        `INSERT INTO ${counts} (queue, tenant, status, shard, n)
          SELECT queue, COALESCE(tenant, ''), status, -1, count(*) FROM ${table} WHERE status IN ('done', 'failed', 'cancelled') GROUP BY queue, COALESCE(tenant, ''), status
          ON DUPLICATE KEY UPDATE n = VALUES(n)`,
      ];
    },
  },
  {
    version: 8,
    name: "finished_history",
    // PostgreSQL's history table (range partitions by finished time) has no counterpart here:
    // MariaDB prunes finished jobs by deleting them. The version is recorded all the same, so that
    // every backend's schema carries the same numbers.
    statements: () => [],
  },
  {
    version: 9,
    name: "failed_index",
    // PostgreSQL's and SQLite's partial index of the failed jobs (dashboard's failures list) has
    // no counterpart here: jobs_finished leads with (status, finished_at) and already bounds that
    // list to the failed rows (differences.ts). Recorded all the same, like version 8.
    statements: () => [],
  },
  {
    version: 10,
    name: "finished_minutes",
    // See migrations/postgres-counts.ts, version 10: row triggers beside migration 7's, the shard is
    // CONNECTION_ID() % COUNT_SHARDS. ON DUPLICATE KEY UPDATE assigns left to right, each seeing
    // the ones before: n is set while minute still holds the slot's old minute.
    statements: ({ table, named }) => {
      const minutes = named("jobs_minutes");
      return [
        `CREATE TABLE IF NOT EXISTS ${minutes} (
          slot INT NOT NULL,
          queue VARCHAR(255) NOT NULL,
          status VARCHAR(16) NOT NULL CHECK (status IN ('done', 'failed')),
          shard INT NOT NULL,
          minute BIGINT NOT NULL,
          n BIGINT NOT NULL,
          PRIMARY KEY (slot, queue, status, shard)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
        ...minuteTriggers(table, minutes, named),
        // DDL commits on its own here (see version 7): the backfill writes shard -1, which no
        // connection's trigger writes, and replaces what it finds there.
        minutesFrom(minutes, table, 1, "-1", "n = VALUES(n)"),
      ];
    },
  },
  {
    version: 11,
    name: "counts_without_in_lists",
    // See migrations/postgres.ts version 11: nothing to change here, recorded all the same.
    statements: () => [],
  },
  {
    version: 12,
    name: "running_keys_index",
    // See migrations/postgres.ts version 12: InnoDB leaves no dead entries for a scan to reread
    // (its purge removes them), so jobs_running serves the count. Recorded all the same.
    statements: () => [],
  },
  {
    version: 13,
    name: "finished_index_without_in_list",
    // See migrations/postgres.ts version 13: nothing to change here, recorded all the same.
    statements: () => [],
  },
  liveJobsOnly("mysql"),
  historyCounts("mysql"),
  runningWithoutLease("mysql"),
  operatorViews("mysql"),
  durableSteps("mysql"),
  dueFlag("mysql"),
  eventWaits("mysql"),
  pausedQueues("mysql"),
  debounceKeys("mysql"),
  awaitedAndProgress("mysql"),
  priorityAging("mysql"),
  sequenceKeys("mysql"),
  claimStableKeys("mysql"),
];
