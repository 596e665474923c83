import pg from "pg";
import type { OrderedSender, QueryResult } from "./executor.js";
import { planEachRun, run } from "./pg-run.js";

/**
 * A PostgreSQL connection of its own (the pool's settings, one more connection) in pg's
 * pipeline mode: `query()` writes each statement to the socket at once, without waiting for
 * the answers before it. A lost connection is dropped; the next statement opens a new one.
 */
export class PgOrderedSender implements OrderedSender {
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  private closed = false;
  /** When a statement last came back without a connection error (performance.now()). */
  private answeredAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly pool: pg.Pool,
    /** Named prepared statements (see PgMode), on a connection set up by planEachRun. */
    private readonly prepared: boolean,
  ) {}

  send<R extends object>(sql: string, params: readonly unknown[], prepared?: string): { sent: Promise<void>; result: Promise<QueryResult<R>> } {
    const name = this.prepared ? prepared : undefined;
    if (this.client) return { sent: Promise.resolve(), result: this.answered(run<R>(this.client, sql, params, name)) };
    const ready = this.connect();
    // Handlers registered in this order run in this order: `sent` resolves after query() was called.
    const result = this.answered(ready.then((client) => run<R>(client, sql, params, name)));
    return { sent: ready.then(() => undefined), result };
  }

  answeredWithin(ms: number): boolean {
    return this.client !== null && performance.now() - this.answeredAt < ms;
  }

  /** A statement's answer, noting when one came back (a statement's own error is an answer too). */
  private answered<T>(result: Promise<T>): Promise<T> {
    result.then(
      () => (this.answeredAt = performance.now()),
      (error: unknown) => {
        if (isStatementError(error)) this.answeredAt = performance.now();
      },
    );
    return result;
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client ?? (await this.connecting?.catch(() => null));
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private connect(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error("the worker's start writes are closed"));
    this.connecting ??= (async () => {
      const client = new pg.Client({ ...(this.pool.options as pg.ClientConfig), pipeline: true } as pg.ClientConfig);
      // Errors reach the statements in flight; the connection is not reused.
      client.on("error", () => {
        if (this.client === client) this.client = null;
      });
      client.on("end", () => {
        if (this.client === client) this.client = null;
      });
      try {
        await client.connect();
        if (this.prepared) await planEachRun(client);
      } catch (error) {
        this.connecting = null;
        throw error;
      }
      this.client = client;
      this.connecting = null;
      return client;
    })();
    return this.connecting;
  }
}

/** An error the server sent about the statement (it has a SQLSTATE), not a broken connection. */
function isStatementError(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    typeof (error as { code?: unknown }).code === "string" &&
    /^[0-9A-Z]{5}$/.test((error as { code: string }).code)
  );
}
