import type { Migration } from "./types.js";

export const postgresMigrations: Migration[] = [
  {
    version: 1,
    name: "create_jobs",
    statements: ({ table, index }) => [
      `CREATE TABLE ${table} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        queue text NOT NULL,
        task text NOT NULL,
        payload jsonb,
        status text NOT NULL DEFAULT 'pending'
          CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled')),
        priority integer NOT NULL DEFAULT 0,
        attempts integer NOT NULL DEFAULT 0,
        max_attempts integer NOT NULL DEFAULT 1 CHECK (max_attempts >= 1),
        last_error text,
        run_at timestamptz NOT NULL DEFAULT now(),
        locked_until timestamptz,
        heartbeat_at timestamptz,
        claim_token uuid,
        locked_by text,
        progress jsonb,
        result jsonb,
        tenant text,
        idempotency_key text,
        dedup_key text,
        trace_context jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz
      )`,
      // NULLs are distinct in a PostgreSQL unique index: jobs without a key never collide.
      `CREATE UNIQUE INDEX ${index("jobs_idempotency_key")} ON ${table} (idempotency_key)`,
      // Seed dedup_key: one pending-or-running job per key; the key is free again once it ends.
      `CREATE UNIQUE INDEX ${index("jobs_dedup_key_active")} ON ${table} (dedup_key) WHERE status IN ('pending', 'running')`,
      // The claim walks this in order and stops at LIMIT; finished rows are not in it at all,
      // so a table full of done jobs does not slow the claim.
      `CREATE INDEX ${index("jobs_claim")} ON ${table} (queue, priority DESC, id) WHERE status = 'pending'`,
      `CREATE INDEX ${index("jobs_running")} ON ${table} (locked_until) WHERE status = 'running'`,
      `CREATE INDEX ${index("jobs_claim_token")} ON ${table} (claim_token) WHERE status = 'running'`,
      `CREATE INDEX ${index("jobs_finished")} ON ${table} (finished_at) WHERE status IN ('done', 'failed', 'cancelled')`,
      `CREATE INDEX ${index("jobs_tenant")} ON ${table} (tenant, id) WHERE tenant IS NOT NULL`,
    ],
  },
  {
    version: 2,
    name: "add_started_at",
    // When the latest run started: wait time (started_at - run_at) on the dashboard and in metrics.
    statements: ({ table, index }) => [
      `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS started_at timestamptz`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_recent_finished")} ON ${table} (queue, finished_at) WHERE finished_at IS NOT NULL`,
    ],
  },
];
