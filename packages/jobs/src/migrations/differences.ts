/**
 * Where the SQLite and MariaDB schemas deliberately differ from the PostgreSQL one
 * (migrations/postgres.ts, the reference), each with its reason. The schema-parity test
 * migrates all three backends and fails on any difference not listed here, and on any entry
 * here that no longer matches a real difference: change a migration, change this list.
 */

export type OtherDialect = "sqlite" | "mysql";

/**
 * The column types each backend stores a PostgreSQL column type as (lower case, integer
 * display widths dropped). A column whose type is in its PostgreSQL type's list is the same
 * column.
 */
export const COLUMN_TYPES: Record<OtherDialect, Record<string, { types: readonly string[]; reason: string }>> = {
  sqlite: {
    bigint: { types: ["integer"], reason: "SQLite has one integer type, 64 bits wide" },
    integer: { types: ["integer"], reason: "SQLite has one integer type, 64 bits wide" },
    text: { types: ["text"], reason: "the same type" },
    jsonb: { types: ["text"], reason: "no JSON type: the queue writes and parses the JSON itself" },
    uuid: { types: ["text"], reason: "no uuid type: the token is its text form" },
    boolean: { types: ["integer"], reason: "no boolean type: 0 and 1" },
    "timestamp with time zone": {
      types: ["integer"],
      reason: "no timestamp type: epoch milliseconds in UTC, which compare and index as plain integers",
    },
  },
  mysql: {
    bigint: { types: ["bigint"], reason: "the same type" },
    integer: { types: ["int"], reason: "the same type" },
    text: {
      types: ["varchar(16)", "varchar(255)", "text", "longtext"],
      reason: "VARCHAR where the column is indexed or compared (InnoDB indexes TEXT only by a prefix), LONGTEXT for error messages",
    },
    jsonb: { types: ["longtext"], reason: "MariaDB's JSON is LONGTEXT anyway; the queue writes and parses the JSON itself" },
    uuid: { types: ["char(36)"], reason: "no uuid type: the token is its text form" },
    boolean: { types: ["tinyint(1)"], reason: "MariaDB's BOOLEAN is TINYINT(1): 0 and 1" },
    "timestamp with time zone": {
      types: ["datetime(6)"],
      reason: "TIMESTAMP ends in 2038 and converts by the session's time zone: DATETIME(6) holds UTC, microseconds kept",
    },
  },
};

export interface SchemaDifference {
  dialect: OtherDialect;
  /** `column <name>`, `index <name>`, `check <column>` or `primary key`, as the parity test names them. */
  object: string;
  /** What the backend has, as the parity test describes it; null when the backend has no such object. */
  is: string | null;
  reason: string;
}

const NO_PARTIAL_INDEXES = "MariaDB has no partial indexes: the predicate's status becomes the index's first column";

export const SCHEMA_DIFFERENCES: readonly SchemaDifference[] = [
  {
    dialect: "mysql",
    object: "column dedup_active",
    is: "varchar(255) GENERATED AS case when status IN 'pending', 'running' then dedup_key end",
    reason: "no partial unique index: the dedup key of a pending or running job, NULL otherwise, so that a UNIQUE index on it holds one active job per key",
  },
  {
    dialect: "mysql",
    object: "column neg_priority",
    is: "bigint GENERATED AS -priority",
    reason:
      "the claim's order is priority DESC, id ASC: an ascending index on (-priority, id) walks it forwards and LIMIT stops the scan and its row locks early",
  },
  {
    dialect: "mysql",
    object: "index jobs_idempotency_key",
    is: "UNIQUE (idempotency_key)",
    reason: "no partial indexes; NULLs are distinct in a unique index, so keyless jobs never collide",
  },
  { dialect: "mysql", object: "index jobs_dedup_key_active", is: "UNIQUE (dedup_active)", reason: "no partial indexes: see column dedup_active" },
  {
    dialect: "mysql",
    object: "index jobs_dedup_key",
    is: "(dedup_key)",
    reason: "the loser of a dedup race re-reads the winner by dedup_key, which jobs_dedup_key_active (on dedup_active) cannot find",
  },
  {
    dialect: "mysql",
    object: "index jobs_claim_plain",
    is: null,
    reason:
      "no partial indexes: the plain claim walks jobs_flow_claim with group_key = '' (it runs only while its queue has no pending job with a group or a key)",
  },
  {
    dialect: "mysql",
    object: "index jobs_flow_claim",
    is: "(status, queue, group_key, due, neg_priority, id)",
    reason: `${NO_PARTIAL_INDEXES}; it serves the plain claim too (see jobs_claim_plain) and column neg_priority; due is a key column (jobs with a group or a key are always due) where elsewhere it is the plain claim index's predicate`,
  },
  {
    dialect: "mysql",
    object: "index jobs_scheduled",
    is: "(scheduled_at)",
    reason: "no partial indexes: see column scheduled_at",
  },
  {
    dialect: "mysql",
    object: "column scheduled_at",
    is: "datetime(6) GENERATED AS case when status = 'pending' AND due = 0 AND group_key = '' AND concurrency_key = '' then run_at end",
    reason:
      "no partial indexes: run_at of a plain pending job that is not due, NULL otherwise, so that an index on it holds the scheduled jobs and a claim, which changes status only, leaves it alone (migration 26)",
  },
  {
    dialect: "mysql",
    object: "column aging_pending",
    is: "int GENERATED AS case when status = 'pending' then aging_every end",
    reason: "no partial indexes: aging_every of a pending job, NULL otherwise, for the same reason as scheduled_at (migration 26)",
  },
  {
    dialect: "mysql",
    object: "index jobs_key_pending",
    is: "(pending_key)",
    reason: "no partial indexes: see column pending_key",
  },
  {
    dialect: "mysql",
    object: "column pending_key",
    is: "varchar(191) GENERATED AS case when status = 'pending' AND concurrency_key <> '' then concurrency_key end",
    reason: "no partial indexes: the key of a pending job, NULL otherwise, so that an index on it holds only pending keyed jobs in its non-NULL range",
  },
  {
    dialect: "mysql",
    object: "column group_key",
    is: "varchar(191) NOT NULL DEFAULT ''",
    reason: "InnoDB keys are at most 3072 bytes: queue, group_key and concurrency_key share jobs_flow_claim, 4 bytes a character",
  },
  {
    dialect: "mysql",
    object: "column concurrency_key",
    is: "varchar(191) NOT NULL DEFAULT ''",
    reason: "InnoDB keys are at most 3072 bytes: see column group_key",
  },
  { dialect: "mysql", object: "index jobs_batch", is: "(batch_id, id)", reason: "no partial indexes: jobs outside a batch (NULL) have entries too" },
  { dialect: "mysql", object: "index jobs_running_queue", is: "(status, queue)", reason: NO_PARTIAL_INDEXES },
  {
    dialect: "mysql",
    object: "index jobs_aging",
    is: "(aging_pending)",
    reason: "no partial indexes: see column aging_pending",
  },
  {
    dialect: "mysql",
    object: "index jobs_key_running",
    is: null,
    reason:
      "InnoDB's purge removes the entries of old row versions: jobs_running_queue, led by status, serves the count of running jobs per key (PostgreSQL's index is there because its scans kept rereading dead entries)",
  },
  {
    dialect: "sqlite",
    object: "index jobs_finished",
    is: "(finished_at) WHERE status = 'done' OR status = 'failed' OR status = 'cancelled'",
    reason:
      "the same rows, the predicate spelled as comparisons: SQLite tests each row a claim or a completion changes against it by filling a temporary B-tree for an IN list of three values (dialects/sqlite.ts, finished)",
  },
  {
    dialect: "sqlite",
    object: "index jobs_key_running",
    is: null,
    reason: "SQLite updates rows in place and leaves no dead index entries: jobs_running_queue serves the count of running jobs per key",
  },
  {
    dialect: "mysql",
    object: "index jobs_waiting",
    is: null,
    reason: "no partial indexes: jobs_flow_claim leads with (status, queue) and already bounds the waiting count to the waiting rows",
  },
  { dialect: "mysql", object: "index jobs_finished", is: "(status, finished_at)", reason: NO_PARTIAL_INDEXES },
  {
    dialect: "mysql",
    object: "index jobs_failed",
    is: null,
    reason: "no partial indexes: jobs_finished leads with status and already bounds the newest failed jobs to the failed rows",
  },
  { dialect: "mysql", object: "index jobs_tenant", is: "(tenant, id)", reason: "no partial indexes: jobs without a tenant have entries too" },
  {
    dialect: "mysql",
    object: "index jobs_claim_token",
    is: "(claim_token)",
    reason:
      "the lease extension has no UPDATE … RETURNING and first locks its rows by token (SELECT … FOR UPDATE); InnoDB locks every row a locking read scans, so without this index it would scan, and wait on, every running job, other workers' included",
  },
];
