import pg from "pg";
import type { Executor, Listener, OrderedSender, QueryResult, TransactionOptions } from "./executor.js";
import { PgOrderedSender } from "./pg-ordered-sender.js";
import { planEachRun, run } from "./pg-run.js";
import { quoteIdent } from "./identifiers.js";
import { SAVEPOINT_NAME, statementOn, transactionOn, type LentConnection } from "./lent-connection.js";

/**
 * A single client: one of ours inside BEGIN (`insideOurs`), or the caller's, idle or inside its
 * own transaction (transactional enqueue). Statements run on it, in order.
 */
export class PgClientExecutor implements Executor {
  readonly dialect = "postgres" as const;
  readonly pooled = false;
  private readonly lent: LentConnection;

  constructor(
    readonly raw: pg.PoolClient | pg.Client,
    private readonly insideOurs = false,
    /** Named prepared statements (see PgMode): only on a connection the queue opened with planEachRun. */
    private readonly prepared: boolean,
  ) {
    this.lent = { begin: (readOnly) => beginOn(raw, readOnly), run: (sql) => raw.query(sql) };
  }

  query<R extends object>(sql: string, params?: readonly unknown[], name?: string): Promise<QueryResult<R>> {
    const as = this.prepared ? name : undefined;
    if (this.insideOurs) return run<R>(this.raw, sql, params, as);
    return statementOn(this.raw, () => run<R>(this.raw, sql, params, as));
  }

  transaction<T>(fn: (tx: Executor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    if (this.insideOurs) return fn(this); // our own BEGIN is open on it: no nesting
    return transactionOn(this.raw, this.lent, () => fn(this), options?.readOnly ?? false);
  }

  async close(): Promise<void> {}
}

/** SQLSTATE no_active_sql_transaction: SAVEPOINT outside a transaction block. */
const NO_ACTIVE_TRANSACTION = "25P01";

/** BEGIN on an idle client, a savepoint inside the caller's transaction. */
async function beginOn(client: pg.PoolClient | pg.Client, readOnly: boolean): Promise<"transaction" | "savepoint"> {
  const begin = async () => {
    await client.query(readOnly ? "BEGIN READ ONLY" : "BEGIN");
    return "transaction" as const;
  };
  // pg ≥ 8.21 tracks the server's transaction status (I idle, T in a transaction, E failed one).
  const status = (client as { getTransactionStatus?: () => string | null }).getTransactionStatus?.() ?? null;
  if (status === "I") return begin();
  try {
    await client.query(`SAVEPOINT ${SAVEPOINT_NAME}`);
    return "savepoint";
  } catch (error) {
    // An older pg (or pg-native) cannot say: the savepoint itself tells an idle client apart.
    if (status === null && (error as { code?: unknown }).code === NO_ACTIVE_TRANSACTION) return begin();
    throw error;
  }
}

/**
 * How the queue talks to a server. Behind a pooler in transaction mode (PgBouncer
 * `pool_mode = transaction`) each transaction may run on another server connection, so nothing
 * may outlive a transaction: a named prepared statement pg prepared once on "its" connection is
 * missing on the next one (PgBouncer < 1.21 does not carry them over), and a LISTEN through it
 * hears nothing once its transaction ends.
 */
export interface PgMode {
  /**
   * Named prepared statements: parsed once per connection, then planned for each run's own
   * parameters. Only on connections the queue opens itself, set by planEachRun: left to choose,
   * PostgreSQL keeps a generic plan after five runs, and one made while the jobs table held a
   * page or two reads it sequentially; nothing replaces that plan until VACUUM or ANALYZE
   * touches the table, so with autovacuum off or held back, every claim and completion walked
   * the grown table until the worker stalled. Elsewhere (a caller's pool or client, a
   * transaction pooler) statements go unnamed, planned at each run.
   */
  prepared: boolean;
  /** Where the LISTEN connection goes: the pool's own settings, a URL of its own (`listenUrl`), or nowhere (workers poll). */
  listen: "pool" | { url: string } | null;
}

export class PgPoolExecutor implements Executor {
  readonly dialect = "postgres" as const;
  readonly pooled = true;
  /** Absent behind a transaction pooler without `listenUrl`: workers poll (see pollingNotice). */
  readonly listen?: Executor["listen"];
  readonly pollingNotice?: string;

  constructor(
    readonly raw: pg.Pool,
    private readonly owned: boolean,
    private readonly mode: PgMode,
  ) {
    const to = mode.listen;
    if (to === null) {
      this.pollingNotice =
        '@forge/jobs: PostgreSQL through a transaction pooler (pooler: "transaction") and no listenUrl: this worker polls for new jobs every pollInterval; give listenUrl (a URL straight to the server) to be woken at once';
    } else {
      const config = to === "pool" ? (raw as unknown as { options: pg.ClientConfig }).options : pgClientConfig(to.url);
      this.listen = (channel, onMessage, onError) => listenOn(config, channel, onMessage, onError);
    }
  }

  query<R extends object>(sql: string, params?: readonly unknown[], name?: string): Promise<QueryResult<R>> {
    return run<R>(this.raw, sql, params, this.mode.prepared ? name : undefined);
  }

  async transaction<T>(fn: (tx: Executor) => Promise<T>, options?: TransactionOptions): Promise<T> {
    let broken: Error | undefined;
    // A checked-out client has no 'error' listener of the pool's. If the server ends the
    // connection between two statements of this transaction (restart, pg_terminate_backend),
    // pg emits 'error' on it, and without a listener that crashes the whole worker process.
    // Record it instead: the next statement fails, and the client is discarded on release.
    // (The pool puts its own listener back on release.)
    const onError = (error: Error) => {
      broken ??= error;
    };
    const client = await this.checkout(onError);
    try {
      await client.query(options?.readOnly ? "BEGIN READ ONLY" : "BEGIN");
      const result = await fn(new PgClientExecutor(client, true, this.mode.prepared));
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: Error) => {
        // A connection that cannot roll back must not go back to the pool half-open.
        broken = rollbackError;
      });
      throw error;
    } finally {
      client.off("error", onError);
      client.release(broken);
    }
  }

  /**
   * `pool.connect()` with `onError` already on the client when it is handed out. Awaiting the
   * promise form leaves a gap: the pool calls back while pg is still parsing the chunk that
   * completed the connection, and a FATAL in the same chunk (a server shutting down, as in
   * `pg_ctl restart`) was emitted before the await resumed — on a client with no listener,
   * which crashed the process. The callback runs inside that parse, so nothing slips between.
   */
  private checkout(onError: (error: Error) => void): Promise<pg.PoolClient> {
    return new Promise((resolve, reject) => {
      this.raw.connect((error, client) => {
        if (error || !client) return reject(error ?? new Error("pg pool gave no client"));
        client.on("error", onError);
        resolve(client);
      });
    });
  }

  orderedSender(): OrderedSender {
    return new PgOrderedSender(this.raw, this.mode.prepared);
  }

  async close(): Promise<void> {
    if (this.owned) await this.raw.end();
  }
}

/** LISTEN on a dedicated connection, outside the pool, so it never holds a worker's slot. */
async function listenOn(config: pg.ClientConfig, channel: string, onMessage: (payload: string) => void, onError: (error: Error) => void): Promise<Listener> {
  const client = new pg.Client(config);
  client.on("error", onError);
  client.on("end", () => onError(new Error("LISTEN connection ended")));
  client.on("notification", (message) => {
    if (message.channel === channel) onMessage(message.payload ?? "");
  });
  await client.connect();
  await client.query(`LISTEN ${quoteIdent("postgres", channel)}`);
  return {
    close: async () => {
      client.removeAllListeners("end");
      client.removeAllListeners("notification");
      await client.end().catch(() => undefined);
    },
  };
}

export function isPgPool(db: unknown): db is pg.Pool {
  return db instanceof pg.Pool || (isObject(db) && typeof db.connect === "function" && "totalCount" in db && "idleCount" in db);
}

export function isPgClient(db: unknown): db is pg.PoolClient | pg.Client {
  return db instanceof pg.Client || (isObject(db) && typeof db.query === "function" && "connectionParameters" in db);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

/**
 * How long a new connection may take. pg's default is forever: through a network that
 * silently drops packets (or a proxy that accepts and never answers), connect() — and so
 * enqueue, and every worker query needing a new connection — hung without an error. Bounded,
 * it fails with "timeout expired", as mysql2 does after its own 10 s default.
 */
export const PG_CONNECT_TIMEOUT_MS = 10_000;

function pgClientConfig(url: string): pg.ClientConfig {
  return { connectionString: url, connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS };
}

/**
 * A client that runs PLAN_EACH_RUN before it is handed out: the pool's `connect` event could
 * only queue it beside the caller's first statement, which pg reports as a deprecated
 * concurrent query (on stderr, where the CLI's output goes). A server that ends the connection
 * meanwhile (a FATAL right after its ReadyForQuery, as on a restart) fails the connect with its
 * error: the pool hands the caller that error, and the client's 'error' event, emitted before
 * anyone could listen, is heard here rather than crashing the process.
 */
class PlanEachRunClient extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: ((err: Error) => void) | ((err: null, client: pg.Client) => void)): void;
  override connect(callback?: ((err: Error) => void) | ((err: null, client: pg.Client) => void)): Promise<pg.Client> | void {
    // Listening from the start: the FATAL can come in the same chunk as ReadyForQuery, emitted
    // before any continuation of connect() runs.
    const heard = () => undefined;
    this.on("error", heard);
    const ready = super
      .connect()
      .then(() => planEachRun(this))
      .then(() => this)
      .finally(() => this.off("error", heard));
    if (!callback) return ready;
    ready.then(
      (client) => (callback as (err: null, client: pg.Client) => void)(null, client),
      (error: Error) => (callback as (err: Error) => void)(error),
    );
  }
}

/** `prepared`: the pool's connections plan each run (PLAN_EACH_RUN), so it may name its statements (see PgMode). */
export function createPgPool(url: string, max = 10, prepared = false): pg.Pool {
  const pool = new pg.Pool({ ...pgClientConfig(url), max, ...(prepared ? { Client: PlanEachRunClient } : {}) });
  // An idle client losing its server must not crash the process; the pool drops it.
  pool.on("error", () => undefined);
  return pool;
}
