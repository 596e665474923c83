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
import { finishedCounts, finishedMinutes } from "./postgres-counts.js";
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
      // Keyless jobs (most) get no entry at all: a status change of a job is never a HOT update
      // (status is in the partial indexes' predicates), so every index that holds the row pays
      // a new entry per claim and per completion. Fewer entries, faster claims.
      `CREATE UNIQUE INDEX ${index("jobs_idempotency_key")} ON ${table} (idempotency_key) WHERE idempotency_key IS NOT NULL`,
      // dedup_key: one pending-or-running job per key; the key is free again once it ends.
      `CREATE UNIQUE INDEX ${index("jobs_dedup_key_active")} ON ${table} (dedup_key) WHERE dedup_key IS NOT NULL AND status IN ('pending', 'running')`,
      // The claim walks this in order and stops at LIMIT; finished rows are not in it at all,
      // so a table full of done jobs does not slow the claim.
      `CREATE INDEX ${index("jobs_claim")} ON ${table} (queue, priority DESC, id) WHERE status = 'pending'`,
      `CREATE INDEX ${index("jobs_running")} ON ${table} (locked_until) WHERE status = 'running'`,
      `CREATE INDEX ${index("jobs_finished")} ON ${table} (finished_at) WHERE status IN ('done', 'failed', 'cancelled')`,
      `CREATE INDEX ${index("jobs_tenant")} ON ${table} (tenant, id) WHERE tenant IS NOT NULL`,
    ],
  },
  {
    version: 2,
    name: "add_started_at",
    // When the latest run started: wait time (started_at - run_at) on the dashboard and in metrics.
    statements: ({ table }) => [`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS started_at timestamptz`],
  },
  {
    version: 3,
    name: "drop_recent_finished",
    // Early 0.1 builds created these two indexes here; no statement reads through them and each
    // costs an entry per claim or completion. DROP INDEX finds an index by schema, not by table.
    statements: ({ schema, index }) =>
      ["jobs_recent_finished", "jobs_claim_token"].map((name) => `DROP INDEX IF EXISTS ${schema ? `${schema}.` : ""}${index(name)}`),
  },
  {
    version: 4,
    name: "flow_control",
    // group_key and concurrency_key are '' when absent, not NULL: the claim finds a group's or a
    // key's jobs by equality on an index, which IS NOT DISTINCT FROM cannot use.
    statements: ({ table, schema, index, named }) => [
      `ALTER TABLE ${table}
        ADD COLUMN IF NOT EXISTS group_key text NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS concurrency_key text NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS snoozes integer NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS max_snoozes integer NOT NULL DEFAULT 100 CHECK (max_snoozes >= 0)`,
      // A job's fair-share group is its tenant unless it names one: jobs already waiting join theirs.
      `UPDATE ${table} SET group_key = tenant WHERE tenant IS NOT NULL AND tenant <> '' AND status IN ('pending', 'running')`,
      // Jobs with neither a group nor a key: the plain claim walks these alone, so a backlog of
      // grouped or keyed jobs never sits in its way (nor it in theirs).
      `DROP INDEX IF EXISTS ${schema ? `${schema}.` : ""}${index("jobs_claim")}`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_claim_plain")} ON ${table} (queue, priority DESC, id) WHERE status = 'pending' AND group_key = '' AND concurrency_key = ''`,
      // Jobs with a group or a key: the fair claim enumerates the groups on this index and walks
      // each group's jobs in claim order. Empty when flow control is unused.
      `CREATE INDEX IF NOT EXISTS ${index("jobs_flow_claim")} ON ${table} (queue, group_key, priority DESC, id) WHERE status = 'pending' AND (group_key <> '' OR concurrency_key <> '')`,
      // A key's pending jobs: whether a key held back by its limit has work waiting (what a claim
      // reports as throttled). Running jobs need no index of their own: they are few, and
      // jobs_running reads them all.
      `CREATE INDEX IF NOT EXISTS ${index("jobs_key_pending")} ON ${table} (concurrency_key) WHERE status = 'pending' AND concurrency_key <> ''`,
      `CREATE TABLE IF NOT EXISTS ${named("jobs_limits")} (
        limit_key text PRIMARY KEY,
        concurrency integer CHECK (concurrency >= 0),
        rate_limit integer CHECK (rate_limit >= 1),
        rate_per_seconds double precision CHECK (rate_per_seconds > 0),
        rate_burst integer CHECK (rate_burst >= 1),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE IF NOT EXISTS ${named("jobs_groups")} (
        group_key text PRIMARY KEY,
        weight integer NOT NULL CHECK (weight >= 1),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      // One row per limited key in use: claims of a key lock its row (claims of other keys never
      // wait on it), and it holds the key's token bucket.
      `CREATE TABLE IF NOT EXISTS ${named("jobs_keys")} (
        concurrency_key text PRIMARY KEY,
        tokens double precision NOT NULL,
        refilled_at timestamptz NOT NULL DEFAULT now()
      )`,
    ],
  },
  {
    version: 5,
    name: "schedules",
    // One row per schedule. Exactly one job per slot is not this table's business: the slot's job
    // carries the idempotency key schedule:<name>@<slot>, and jobs_idempotency_key refuses a second.
    // next_run_at is the next slot not yet enqueued; the scheduler walks due rows by it.
    statements: ({ named, index }) => [
      `CREATE TABLE IF NOT EXISTS ${named("jobs_schedules")} (
        name text PRIMARY KEY,
        cron text NOT NULL,
        timezone text NOT NULL,
        task text NOT NULL,
        payload jsonb,
        queue text NOT NULL,
        tenant text,
        catch_up text NOT NULL CHECK (catch_up IN ('none', 'last', 'all')),
        catch_up_limit integer NOT NULL CHECK (catch_up_limit >= 1),
        overlap text NOT NULL CHECK (overlap IN ('allow', 'skip')),
        paused boolean NOT NULL DEFAULT false,
        from_code boolean NOT NULL DEFAULT false,
        definition text NOT NULL,
        next_run_at timestamptz,
        last_run_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_schedules_due")} ON ${named("jobs_schedules")} (next_run_at) WHERE NOT paused`,
    ],
  },
  {
    version: 6,
    name: "dependencies_and_batches",
    // waiting: a job whose dependencies have not all ended; never claimed (every claim reads
    // status = 'pending'). deps_pending counts its unfinished dependencies: each dependent has
    // its own counter, decremented by the transaction that ends one of its dependencies.
    // has_dependents lets a completion skip the edge lookup for the (usual) job nobody waits
    // on; batch_id names the batch an item belongs to (jobs_batches).
    statements: ({ table, named, index }) => [
      `ALTER TABLE ${table} DROP CONSTRAINT IF EXISTS jobs_status_check`,
      `ALTER TABLE ${table} ADD CONSTRAINT jobs_status_check CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled', 'waiting'))`,
      `ALTER TABLE ${table}
        ADD COLUMN IF NOT EXISTS deps_pending integer NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS on_dependency_failure text CHECK (on_dependency_failure IN ('fail', 'cancel', 'run')),
        ADD COLUMN IF NOT EXISTS has_dependents boolean NOT NULL DEFAULT false,
        ADD COLUMN IF NOT EXISTS batch_id bigint`,
      // A batch's items, in id order: the completion probes the highest unfinished one, and
      // the callback counts them by status.
      `CREATE INDEX IF NOT EXISTS ${index("jobs_batch")} ON ${table} (batch_id, id) WHERE batch_id IS NOT NULL`,
      // One row per edge: job_id waits for depends_on_id. Read both ways: a job's dependencies
      // (ctx.dependencies(), getJob) by the primary key, its dependents (release) by the other.
      `CREATE TABLE IF NOT EXISTS ${named("jobs_dependencies")} (
        job_id bigint NOT NULL,
        depends_on_id bigint NOT NULL,
        PRIMARY KEY (job_id, depends_on_id)
      )`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_dependents")} ON ${named("jobs_dependencies")} (depends_on_id, job_id)`,
      // One row per batch; locked only when a completion finds no unfinished item it could
      // lock itself (see batch-release.ts), so not on every item's completion.
      `CREATE TABLE IF NOT EXISTS ${named("jobs_batches")} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        callback_id bigint,
        tenant text,
        total integer NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz
      )`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_batches_callback")} ON ${named("jobs_batches")} (callback_id)`,
    ],
  },
  finishedCounts,
  {
    version: 8,
    name: "finished_history",
    // Finished jobs moved out of the jobs table by prune({ into: "history" }) (history.ts):
    // range partitions by finished time, one per UTC day, created by the mover as it needs them,
    // so that retention drops a day's partition instead of deleting its rows. The columns are
    // the jobs table's (a later migration that adds a column to one adds it to the other); no
    // identity (ids are the jobs'), no CHECKs (only finished rows come in). Reads by id probe
    // each partition's id index.
    statements: ({ table, named, index }) => [
      `CREATE TABLE IF NOT EXISTS ${named("jobs_history")} (LIKE ${table} INCLUDING DEFAULTS) PARTITION BY RANGE (finished_at)`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_history_id")} ON ${named("jobs_history")} (id)`,
    ],
  },
  {
    version: 9,
    name: "failed_index",
    // The failed jobs, newest first: the dashboard's list of recent failures. No other index
    // finds them (jobs_finished holds every finished row), so that list walked the primary key
    // backwards past every done row: with 10,000,000 of them and no failure, the whole table.
    // An entry per failed job only; a job that is retried leaves it.
    statements: ({ table, index }) => [`CREATE INDEX IF NOT EXISTS ${index("jobs_failed")} ON ${table} (id) WHERE status = 'failed'`],
  },
  finishedMinutes,
  {
    version: 11,
    name: "counts_without_in_lists",
    // SQLite rewrites its counting row triggers and jobs_counts' CHECK (migrations/sqlite-counts.ts);
    // this backend has nothing to change. Recorded all the same, like SQLite's version 8.
    statements: () => [],
  },
  {
    version: 12,
    name: "running_keys_index",
    // The running jobs of given keys: what a fair claim counts under its key locks, and what the
    // survey of full keys reads, on every claim of limited keys. Through jobs_running they were
    // a bitmap scan of every running job, and a bitmap scan never marks the index entries of
    // dead row versions (each claim, start write and completion leaves some): between vacuums
    // every claim read them all again. An entry per running job with a key only.
    statements: ({ table, index }) => [
      `CREATE INDEX IF NOT EXISTS ${index("jobs_key_running")} ON ${table} (concurrency_key) WHERE status = 'running' AND concurrency_key <> ''`,
    ],
  },
  {
    version: 13,
    name: "finished_index_without_in_list",
    // SQLite spells jobs_finished's predicate as comparisons (dialects/sqlite.ts, finished);
    // nothing to change here. Recorded all the same, like SQLite's version 8.
    statements: () => [],
  },
  liveJobsOnly("postgres"),
  historyCounts("postgres"),
  runningWithoutLease("postgres"),
  operatorViews("postgres"),
  durableSteps("postgres"),
  dueFlag("postgres"),
  eventWaits("postgres"),
  pausedQueues("postgres"),
  debounceKeys("postgres"),
  awaitedAndProgress("postgres"),
  priorityAging("postgres"),
  sequenceKeys("postgres"),
  claimStableKeys("postgres"),
];
