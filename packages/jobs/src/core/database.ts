import type { DialectName, Executor } from "../db/executor.js";
import { dialectFor, type Dialect } from "../dialects/index.js";
import { qualified } from "../db/identifiers.js";
import type { PayloadCodec } from "../base/payload-codec.js";

export const TABLE_NAME = "jobs";
export const MIGRATIONS_TABLE = "forge_jobs_migrations";
/** Flow control's tables, beside the jobs table: limits per key or pattern, fair-share weights, and each limited key's state. */
export const LIMITS_TABLE = "jobs_limits";
export const GROUPS_TABLE = "jobs_groups";
export const KEYS_TABLE = "jobs_keys";
/** Recurring schedules (`schedule`), one row each. */
export const SCHEDULES_TABLE = "jobs_schedules";
/** Dependencies (one row per edge: job_id waits for depends_on_id) and batches (one row each). */
export const DEPENDENCIES_TABLE = "jobs_dependencies";
export const BATCHES_TABLE = "jobs_batches";
/** Finished jobs per queue, tenant and status, kept by triggers (migration 7): what statusCounts reads. */
export const COUNTS_TABLE = "jobs_counts";
/** Jobs ended done or failed per queue and minute, a ring kept by triggers (migration 10): what the dashboard's chart reads. */
export const MINUTES_TABLE = "jobs_minutes";
export const HISTORY_TABLE = "jobs_history";
/**
 * The dashboard's operator views (migration 17): the workers registry, one row per running worker
 * (worker/registry.ts writes it, reads/workers.ts reads it), and the earlier attempts of jobs that
 * ran more than once (run/attempts.ts writes them, reads/attempts.ts reads them).
 */
export const WORKERS_TABLE = "jobs_workers";
export const ATTEMPTS_TABLE = "jobs_attempts";

/** `jobDefaults` of connect(), checked (job-defaults.ts): what an enqueue falls back on. */
/** Priority aging, checked (core/aging.ts). */
export interface JobAging {
  every: number;
  max: number;
}

export interface ResolvedJobDefaults {
  maxAttempts: number;
  /** The queues whose entry in `jobDefaults.queues` sets maxAttempts. */
  maxAttemptsByQueue: ReadonlyMap<string, number>;
  /** The queues whose entry in `jobDefaults.queues` sets a dead-letter queue. */
  deadLetterByQueue?: ReadonlyMap<string, string>;
  /** The queues whose entry in `jobDefaults.queues` sets priority aging. */
  agingByQueue?: ReadonlyMap<string, JobAging>;
}

export interface DatabaseSettings {
  /** PostgreSQL schema / MariaDB database holding the jobs table; null = the connection's default. */
  schema: string | null;
  maxPayloadBytes: number;
  /** Largest serialized result stored; a larger one fails its job. */
  maxResultBytes: number;
  /** `jobDefaults`, checked: what a job enqueued through this database gets for an option left out. */
  jobDefaults: ResolvedJobDefaults;
  /** `payloadCodec`: what payloads, results and errors are sealed with; null = stored as they are. */
  payloadCodec?: PayloadCodec | null;
}

/**
 * A queue database: an executor plus where the table lives. What every public function
 * accepts as `db` (raw driver objects are wrapped into one of these on the way in).
 */
export class JobsDatabase {
  readonly dialect: DialectName;
  /** The backend's SQL fragments and capabilities (the clock, tokens, RETURNING…): what operations build their statements from. */
  readonly sql: Dialect;
  /** Quoted, schema-qualified table name: the only interpolation the SQL receives. */
  readonly table: string;
  readonly migrationsTable: string;
  /** Flow control: limits (`setLimit`), group weights (`setGroupWeight`), per-key lock and token bucket. */
  readonly limitsTable: string;
  readonly groupsTable: string;
  readonly keysTable: string;
  /** Recurring schedules: `schedule`, `listSchedules`, the scheduler. */
  readonly schedulesTable: string;
  /** Dependencies and batches: `dependsOn`, `enqueueBatch`. */
  readonly dependenciesTable: string;
  readonly batchesTable: string;
  /** Finished-job counts: `statusCounts`. */
  readonly countsTable: string;
  /** Ended jobs per minute: the dashboard's chart. */
  readonly minutesTable: string;
  /** Ended jobs (done, failed, cancelled): the write that ends a job moves its row here (run/ended.ts). */
  readonly historyTable: string;
  /** Live workers (worker/registry.ts) and the attempts that ended with the job running again (run/attempts.ts). */
  readonly workersTable: string;
  readonly attemptsTable: string;
  /** The LISTEN/NOTIFY channel of this schema's queue. */
  readonly channel: string;

  constructor(
    readonly executor: Executor,
    readonly settings: DatabaseSettings,
    private readonly bindClient?: (client: unknown) => Executor,
    /** The read replica (`readUrl`), for reads that only display; none: the executor. */
    private readonly replica?: Executor,
  ) {
    this.dialect = executor.dialect;
    // The codec travels with the dialect to the one row decoder (core/job-row.ts).
    this.sql = settings.payloadCodec ? { ...dialectFor(this.dialect), payloadCodec: settings.payloadCodec } : dialectFor(this.dialect);
    this.table = qualified(this.dialect, settings.schema, TABLE_NAME);
    this.migrationsTable = qualified(this.dialect, settings.schema, MIGRATIONS_TABLE);
    this.limitsTable = qualified(this.dialect, settings.schema, LIMITS_TABLE);
    this.groupsTable = qualified(this.dialect, settings.schema, GROUPS_TABLE);
    this.keysTable = qualified(this.dialect, settings.schema, KEYS_TABLE);
    this.schedulesTable = qualified(this.dialect, settings.schema, SCHEDULES_TABLE);
    this.dependenciesTable = qualified(this.dialect, settings.schema, DEPENDENCIES_TABLE);
    this.batchesTable = qualified(this.dialect, settings.schema, BATCHES_TABLE);
    this.countsTable = qualified(this.dialect, settings.schema, COUNTS_TABLE);
    this.minutesTable = qualified(this.dialect, settings.schema, MINUTES_TABLE);
    this.historyTable = qualified(this.dialect, settings.schema, HISTORY_TABLE);
    this.workersTable = qualified(this.dialect, settings.schema, WORKERS_TABLE);
    this.attemptsTable = qualified(this.dialect, settings.schema, ATTEMPTS_TABLE);
    this.channel = settings.schema ? `forge_jobs.${settings.schema}` : "forge_jobs";
  }

  get schema(): string | null {
    return this.settings.schema;
  }

  /**
   * The same queue on a client the caller holds inside its own transaction: a job enqueued
   * through it becomes visible only when the caller commits (transactional enqueue).
   */
  bind(client: unknown): JobsDatabase {
    if (!this.bindClient) throw new Error("this database cannot bind a client");
    return new JobsDatabase(this.bindClient(client), this.settings, this.bindClient);
  }

  private workerView: JobsDatabase | undefined;

  /**
   * The same queue for a worker (`runWorker`, `processOne`, `drain`): on an SQLite handle the
   * application shares, its statements never run inside the application's open transaction.
   */
  forWorker(): JobsDatabase {
    const executor = this.executor.forWorker?.() ?? this.executor;
    if (executor === this.executor) return this;
    this.workerView ??= new JobsDatabase(executor, this.settings, this.bindClient);
    return this.workerView;
  }

  private readView: JobsDatabase | undefined;

  /**
   * The same queue for reads that only display (getJob, listJobs, pendingCount, statusCounts,
   * the dashboard's pages, `forge-jobs status`): on the read replica when `readUrl` named one,
   * else this very database. Nothing written, and nothing a write decides on, is read here.
   */
  forReading(): JobsDatabase {
    if (!this.replica) return this;
    this.readView ??= new JobsDatabase(this.replica, this.settings);
    return this.readView;
  }

  async close(): Promise<void> {
    await Promise.all([this.executor.close(), this.replica?.close()]);
  }
}
