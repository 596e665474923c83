/**
 * The one seam between the queue and a database driver. Every SQL operation of the queue
 * runs through an Executor; each backend (PostgreSQL, SQLite, MariaDB) implements it once.
 */
export type DialectName = "postgres" | "sqlite" | "mysql";

export interface QueryResult<R> {
  rows: R[];
  /** Rows inserted, updated or deleted (or returned, for a SELECT). */
  rowCount: number;
}

export interface TransactionOptions {
  /** Reject every write inside the transaction (PostgreSQL/MariaDB READ ONLY, SQLite query_only). */
  readOnly?: boolean;
}

/** A subscription to wake-ups; closing it stops them. */
export interface Listener {
  close(): Promise<void>;
}

export interface Executor {
  readonly dialect: DialectName;
  /** The driver object under this executor: what `checkpoint` hands to the handler's work. */
  readonly raw: unknown;
  /**
   * SQL is written with PostgreSQL's `$1 … $n` placeholders; other dialects rewrite them.
   * `name` lets a backend keep the statement prepared across calls.
   */
  query<R extends object = Record<string, unknown>>(sql: string, params?: readonly unknown[], name?: string): Promise<QueryResult<R>>;
  /** One short transaction on one connection. Inside a caller's transaction, runs in it. */
  transaction<T>(fn: (tx: Executor) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /** False for a single client lent by the caller: nothing may run on it concurrently. */
  readonly pooled: boolean;
  /** Push wake-ups (PostgreSQL LISTEN). Absent where the backend has none: workers poll. */
  listen?(channel: string, onMessage: (payload: string) => void, onError: (error: Error) => void): Promise<Listener>;
  /** Why a backend that can push has no `listen` here (behind a transaction pooler): a worker says it once at start. */
  readonly pollingNotice?: string;
  /** In-process wake-up after an enqueue, where the server cannot push (SQLite); PostgreSQL notifies in SQL. */
  notify?(channel: string, payload: string): void;
  /**
   * The same connection for a worker's own statements (claims, completions, leases, checkpoints).
   * Absent where that makes no difference. On an SQLite handle the application shares, it never
   * runs inside the application's open transaction: it waits for the transaction to end.
   */
  forWorker?(): Executor;
  /** True while the application has its own transaction open on this very connection (a shared SQLite handle). */
  callerTransactionOpen?(): boolean;
  /**
   * A connection of the caller's own on which each statement is handed to the socket the moment
   * it is asked (pipelined), saying when: see OrderedSender. Absent where the driver cannot say.
   */
  orderedSender?(): OrderedSender;
  close(): Promise<void>;
}

/**
 * Statements sent in order on one connection without waiting for the answers in between.
 * `sent` resolves once the statement's bytes are with the operating system: a process killed
 * after that still has it executed (the server reads what the kernel delivers), which is what
 * lets a worker record a job's start and run its handler without a round trip in between.
 */
export interface OrderedSender {
  send<R extends object>(sql: string, params: readonly unknown[], name?: string): { sent: Promise<void>; result: Promise<QueryResult<R>> };
  /**
   * Whether its connection answered a statement in the last `ms`: a write that has "left" on a
   * connection silent for longer may have left into a connection that died meanwhile (a
   * failover, a proxy's cut), unnoticed until the write's answer.
   */
  answeredWithin(ms: number): boolean;
  close(): Promise<void>;
}
