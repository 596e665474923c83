import type { DialectName, Executor } from "../db/executor.js";
import type { PayloadCodec } from "../base/payload-codec.js";

/**
 * What differs between backends beyond the driver: the SQL fragments the operation files build
 * their statements from, and what each database can or cannot do. One object per backend,
 * reached as `db.sql`; the driver adapters under db/ only connect, cache, retry and encode.
 */
export interface Dialect {
  readonly name: DialectName;
  /** The database clock as an SQL expression: every time comparison uses it, never a worker's clock. */
  readonly now: string;
  /** `now ± seconds`, the seconds being an SQL expression (usually a `$n`). */
  nowPlus(seconds: string, sign?: "+" | "-"): string;
  /** An SQL expression for a new claim token, evaluated per row; null where the queue makes tokens itself. */
  readonly newToken: string | null;
  /** Whether UPDATE … RETURNING exists; without it, a write that answers rows is a lock → update → read back script. */
  readonly returning: boolean;
  /** Whether a ready-job walk can pass over rows other claimers hold (FOR UPDATE SKIP LOCKED). */
  readonly skipLocked: boolean;
  /** The claim order as the ready index stores it (priority DESC, then id). */
  readonly readyOrder: string;
  /**
   * A job in the claim index (migration 19's `due`), spelled as the index states it: the plain
   * claim index's predicate on PostgreSQL and SQLite, a key column equal to 1 on MariaDB.
   */
  readonly due: string;
  /** Its negation: a scheduled job, spelled as the scheduled index states it. */
  readonly notDue: string;
  /**
   * A boolean as this backend stores it (PostgreSQL's boolean, 1/0 elsewhere): a statement's
   * parameter, or its text a literal (`due`, `has_dependents`, `holds`).
   */
  boolean(value: boolean): boolean | number;
  /** The database clock is this process's own (SQLite, in process): JavaScript can read it without a statement. */
  readonly localClock: boolean;
  /**
   * `column IN <list parameter>`, for an array parameter as the driver sends it: a PostgreSQL
   * array, a JSON text (SQLite, read with json_each), or a list expanded in place (MariaDB).
   */
  inList(column: string, parameter: string): string;
  /** Text concatenation of SQL expressions. */
  concat(parts: readonly string[]): string;
  /** A timestamp column as ISO-8601 UTC text with milliseconds (`2024-01-02T03:04:05.678Z`). */
  isoTimestamp(column: string): string;
  /** A timestamp column as epoch milliseconds, where reading it that way is cheaper than the driver's own parsing. */
  epochMs(column: string): string;
  /** A JSON column's value as the driver hands it back, decoded. */
  readJson(value: unknown): unknown;
  /** The database's `payloadCodec`, set on its own copy of the dialect (core/database.ts): what sealed columns are opened with. */
  readonly payloadCodec?: PayloadCodec;
  /**
   * The predicate of a finished row (done, failed or cancelled) for a row `alias`, spelled as the
   * finished index's own predicate: a query reads a partial index only if its WHERE repeats it.
   */
  finished(alias?: string): string;
  /** What only MariaDB's own statements use (their entries of the per-backend maps); null elsewhere. */
  readonly mariadb: MariadbOnly | null;
}

/** MariaDB's part of the dialect: what its lack of UPDATE … RETURNING / … FROM a list asks for. */
export interface MariadbOnly {
  /**
   * Each row's own value of a list, in one UPDATE of many rows: the value at the position of the
   * row's id in `ids` (`ids` holding the ids, `values` the values, in the same order).
   */
  valueForId(ids: string, values: string): string;
  /**
   * After an INSERT IGNORE that skipped `duplicates` rows: fails when there were other warnings
   * (a value out of range, a NULL for NOT NULL — which IGNORE would have stored "adjusted").
   */
  refuseWarnings(tx: Executor, duplicates: number): Promise<void>;
}

/** `status IN (…)` of the finished states, where the finished index's predicate is spelled that way. */
export function finishedIn(alias = ""): string {
  return `${alias ? `${alias}.` : ""}status IN ('done', 'failed', 'cancelled')`;
}

/** A JSON column the driver hands back as text (SQLite, MariaDB) or bytes. */
export function parseJsonText(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return JSON.parse(value) as unknown;
  if (Buffer.isBuffer(value)) return JSON.parse(value.toString("utf8")) as unknown;
  return value;
}
