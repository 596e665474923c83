import { connect, type JobsDatabase } from "@forge/jobs";
import type { AppConfig } from "./config.js";

/** The queue's executor: `$1…$n` SQL, rewritten for SQLite; one connection pool for the queue and the app. */
export type Sql = JobsDatabase["executor"];

/**
 * The app's database: the queue's tables and the app's own (imports, contacts) in one
 * database, so a business row and its job can be written in one transaction.
 */
export class AppDatabase {
  readonly imports: string;
  readonly contacts: string;

  constructor(readonly jobs: JobsDatabase) {
    if (jobs.dialect === "mysql") throw new Error("the sample app runs on SQLite or PostgreSQL (its own tables have no MariaDB migration)");
    this.imports = this.table("imports");
    this.contacts = this.table("contacts");
  }

  /** Quoted, schema-qualified like the queue's own table. */
  private table(name: string): string {
    return this.jobs.schema ? `"${this.jobs.schema}"."${name}"` : `"${name}"`;
  }

  get sql(): Sql {
    return this.jobs.executor;
  }

  /**
   * Runs `work` in one transaction; `jobs` is the queue bound to that transaction's
   * connection (`jobsDb.bind(client)`), so what it enqueues commits or rolls back with `sql`.
   */
  transaction<T>(work: (sql: Sql, jobs: JobsDatabase) => Promise<T>): Promise<T> {
    return this.jobs.executor.transaction((tx) => work(tx, this.jobs.bind(tx.raw)));
  }

  /** The SQL runner for the driver object a checkpoint hands to a handler's work (or the pool without one). */
  on(tx: unknown): Sql {
    return tx === undefined || tx === null ? this.jobs.executor : this.jobs.bind(tx).executor;
  }

  close(): Promise<void> {
    return this.jobs.close();
  }
}

export function openDatabase(config: Pick<AppConfig, "databaseUrl" | "databaseSchema">): AppDatabase {
  return new AppDatabase(connect(config.databaseUrl, config.databaseSchema ? { schema: config.databaseSchema } : {}));
}
