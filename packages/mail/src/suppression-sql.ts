import {
  isSuppressionReason,
  suppressionKey,
  type SuppressedRecipient,
  type SuppressionEntry,
  type SuppressionInput,
  type SuppressionList,
  type SuppressionListQuery,
  type SuppressionReason,
} from "./suppression.js";

/** The three backends; `mysql` and `mariadb` are the same dialect. */
export type SuppressionDialect = "postgres" | "sqlite" | "mysql" | "mariadb";

/**
 * Runs one statement with positional parameters (`$1…` for PostgreSQL, `?` for SQLite and
 * MariaDB) and resolves with its rows as objects (empty for a statement without rows).
 * The application passes it, on its own pool or inside its own transaction: this package
 * loads no database driver.
 */
export type SqlQuery = (sql: string, params: readonly unknown[]) => Promise<ReadonlyArray<Record<string, unknown>>>;

export interface SqlSuppressionListOptions {
  query: SqlQuery;
  dialect: SuppressionDialect;
  /** Table name, optionally schema-qualified (`mail.suppressions`); default `forge_mail_suppressions`. */
  table?: string | undefined;
  /**
   * The placeholders `query` takes: `$n` (`$1, $2…`) or `?`. Default: `$n` for PostgreSQL,
   * `?` for SQLite and MariaDB, as their drivers take; say `$n` for a query function that
   * rewrites `$n` itself (such as `@forge/jobs`'s executor on every backend).
   */
  placeholders?: "$n" | "?" | undefined;
}

export const DEFAULT_SUPPRESSION_TABLE = "forge_mail_suppressions";

/** Rows per statement: well under every backend's parameter limit (SQLite's is the lowest). */
const CHUNK = 200;
const MAX_PAGE = 1000;
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

type Backend = "postgres" | "sqlite" | "mysql";
type Style = "$n" | "?";

function backendOf(dialect: unknown): Backend {
  if (dialect === "postgres" || dialect === "sqlite" || dialect === "mysql") return dialect;
  if (dialect === "mariadb") return "mysql";
  throw new TypeError(`suppression list: dialect must be "postgres", "sqlite", "mysql" or "mariadb"; got ${JSON.stringify(dialect)}`);
}

function quotedTable(table: string | undefined, backend: Backend): string {
  const parts = (table ?? DEFAULT_SUPPRESSION_TABLE).split(".");
  if (parts.length > 2 || !parts.every((part) => IDENTIFIER.test(part))) {
    throw new TypeError(`suppression list: table must be a name or schema.name of letters, digits and underscores; got ${JSON.stringify(table)}`);
  }
  const quote = backend === "mysql" ? "`" : '"';
  return parts.map((part) => `${quote}${part}${quote}`).join(".");
}

/**
 * The `CREATE TABLE` (and index) statements of the SQL suppression list for one backend,
 * to run once (each is idempotent) or to copy into your own migrations.
 */
export function suppressionTableSql(dialect: SuppressionDialect, options: { table?: string | undefined } = {}): string[] {
  const backend = backendOf(dialect);
  const table = quotedTable(options.table, backend);
  const index = quotedTable(`${(options.table ?? DEFAULT_SUPPRESSION_TABLE).split(".").pop()!}_reason`, backend);
  const reasons = "('hard-bounce', 'complaint', 'unsubscribe', 'manual')";
  switch (backend) {
    case "postgres":
      return [
        `CREATE TABLE IF NOT EXISTS ${table} (
  address text PRIMARY KEY,
  reason text NOT NULL CHECK (reason IN ${reasons}),
  detail text,
  created_at timestamptz NOT NULL DEFAULT now()
)`,
        `CREATE INDEX IF NOT EXISTS ${index} ON ${table} (reason, address)`,
      ];
    case "sqlite":
      return [
        `CREATE TABLE IF NOT EXISTS ${table} (
  address TEXT PRIMARY KEY,
  reason TEXT NOT NULL CHECK (reason IN ${reasons}),
  detail TEXT,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)`,
        `CREATE INDEX IF NOT EXISTS ${index} ON ${table} (reason, address)`,
      ];
    case "mysql":
      // 320 = 64 (local part) + 1 + 255 (domain); utf8mb4_bin so the stored lower case is compared as is.
      return [
        `CREATE TABLE IF NOT EXISTS ${table} (
  address VARCHAR(320) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
  reason VARCHAR(16) NOT NULL CHECK (reason IN ${reasons}),
  detail TEXT,
  created_at DATETIME(3) NOT NULL,
  INDEX ${index.split(".").pop()!} (reason, address)
)`,
      ];
  }
}

function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += CHUNK) out.push(items.slice(i, i + CHUNK));
  return out;
}

function placeholders(style: Style, count: number, offset = 0): string[] {
  return Array.from({ length: count }, (_, i) => (style === "$n" ? `$${offset + i + 1}` : "?"));
}

function styleOf(backend: Backend, given: unknown): Style {
  if (given === undefined) return backend === "postgres" ? "$n" : "?";
  if (given === "$n" || given === "?") return given;
  throw new TypeError(`suppression list: placeholders must be "$n" or "?"; got ${JSON.stringify(given)}`);
}

function checkAddresses(what: string, addresses: readonly string[]): string[] {
  if (!Array.isArray(addresses)) throw new TypeError(`suppression list: ${what} takes an array of addresses`);
  return addresses.map((address, i) => {
    if (typeof address !== "string" || suppressionKey(address) === "") {
      throw new TypeError(`suppression list: ${what}: addresses[${i}] must be a non-empty string; got ${JSON.stringify(address)}`);
    }
    return address;
  });
}

function checkEntries(entries: readonly SuppressionInput[]): SuppressionInput[] {
  if (!Array.isArray(entries)) throw new TypeError("suppression list: add takes an array of { address, reason, detail? }");
  return entries.map((entry, i) => {
    const address = typeof entry?.address === "string" ? suppressionKey(entry.address) : "";
    if (address === "" || address.length > 320) throw new TypeError(`suppression list: add: entries[${i}].address must be an address of 1 to 320 characters`);
    if (!isSuppressionReason(entry.reason)) {
      throw new TypeError(
        `suppression list: add: entries[${i}].reason must be hard-bounce, complaint, unsubscribe or manual; got ${JSON.stringify(entry.reason)}`,
      );
    }
    if (entry.detail !== undefined && typeof entry.detail !== "string") throw new TypeError(`suppression list: add: entries[${i}].detail must be a string`);
    return { address, reason: entry.reason, detail: entry.detail?.slice(0, 1000) };
  });
}

/** Upsert: keep the first reason, but let anything replace an unsubscribe (it holds back bulk mail only). */
function insertSql(backend: Backend, style: Style, table: string, rows: number): string {
  // The row being replaced is named by the table's own (unqualified) name, on both backends.
  const target = table.split(".").pop()!;
  if (backend === "mysql") {
    const values = Array.from({ length: rows }, (_, row) => `(${placeholders(style, 3, row * 3).join(", ")}, UTC_TIMESTAMP(3))`).join(", ");
    // `detail` before `reason`: MariaDB evaluates the assignments left to right, on the updated row.
    return `INSERT INTO ${table} (address, reason, detail, created_at) VALUES ${values}
ON DUPLICATE KEY UPDATE detail = IF(reason = 'unsubscribe', VALUES(detail), detail), reason = IF(reason = 'unsubscribe', VALUES(reason), reason)`;
  }
  const values = Array.from({ length: rows }, (_, row) => `(${placeholders(style, 3, row * 3).join(", ")})`).join(", ");
  return `INSERT INTO ${table} (address, reason, detail) VALUES ${values}
ON CONFLICT (address) DO UPDATE SET reason = excluded.reason, detail = excluded.detail WHERE ${target}.reason = 'unsubscribe'`;
}

function createdAtColumn(backend: Backend): string {
  if (backend === "postgres") return `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at`;
  if (backend === "mysql") return `DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%s.%fZ') AS created_at`;
  return "created_at";
}

function toEntry(row: Record<string, unknown>): SuppressionEntry {
  const reason = row.reason;
  if (!isSuppressionReason(reason)) throw new Error(`suppression list: unknown reason ${JSON.stringify(reason)} in the table`);
  return {
    address: String(row.address),
    reason,
    detail: row.detail === null || row.detail === undefined ? null : String(row.detail),
    createdAt: new Date(String(row.created_at)),
  };
}

/**
 * A suppression list in a SQL table (`suppressionTableSql` creates it), through the `query`
 * function the application passes: on PostgreSQL, SQLite or MariaDB.
 */
export function createSqlSuppressionList(options: SqlSuppressionListOptions): SuppressionList {
  if (typeof options?.query !== "function") throw new TypeError("createSqlSuppressionList: query must be a function (sql, params) => Promise<rows>");
  const { query } = options;
  const backend = backendOf(options.dialect);
  const table = quotedTable(options.table, backend);
  const style = styleOf(backend, options.placeholders);

  return {
    async isSuppressed(addresses) {
      const given = checkAddresses("isSuppressed", addresses);
      const reasons = new Map<string, SuppressionReason>();
      for (const keys of chunks([...new Set(given.map(suppressionKey))])) {
        const rows = await query(`SELECT address, reason FROM ${table} WHERE address IN (${placeholders(style, keys.length).join(", ")})`, keys);
        for (const row of rows) if (isSuppressionReason(row.reason)) reasons.set(String(row.address), row.reason);
      }
      // In the order given, as given: the caller matches them against its own recipients.
      return given.flatMap((address): SuppressedRecipient[] => {
        const reason = reasons.get(suppressionKey(address));
        return reason === undefined ? [] : [{ address, reason }];
      });
    },

    async add(entries) {
      const rows = checkEntries(entries);
      // One row per address per statement: an upsert may not touch the same row twice.
      const unique = [...new Map(rows.map((row) => [row.address, row])).values()];
      for (const chunk of chunks(unique)) {
        await query(
          insertSql(backend, style, table, chunk.length),
          chunk.flatMap((row) => [row.address, row.reason, row.detail ?? null]),
        );
      }
    },

    async remove(addresses) {
      const keys = [...new Set(checkAddresses("remove", addresses).map(suppressionKey))];
      let removed = 0;
      for (const chunk of chunks(keys)) {
        const rows = await query(`DELETE FROM ${table} WHERE address IN (${placeholders(style, chunk.length).join(", ")}) RETURNING address`, chunk);
        removed += rows.length;
      }
      return removed;
    },

    async list(q: SuppressionListQuery = {}) {
      const limit = q.limit ?? 100;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
        throw new TypeError(`suppression list: list: limit must be an integer from 1 to ${MAX_PAGE}; got ${String(limit)}`);
      if (q.reason !== undefined && !isSuppressionReason(q.reason)) throw new TypeError(`suppression list: list: unknown reason ${JSON.stringify(q.reason)}`);
      const where: string[] = [];
      const params: unknown[] = [];
      if (q.reason !== undefined) {
        params.push(q.reason);
        where.push(`reason = ${placeholders(style, 1, params.length - 1)[0]!}`);
      }
      if (q.after !== undefined) {
        params.push(suppressionKey(q.after));
        where.push(`address > ${placeholders(style, 1, params.length - 1)[0]!}`);
      }
      const rows = await query(
        `SELECT address, reason, detail, ${createdAtColumn(backend)} FROM ${table}${where.length ? ` WHERE ${where.join(" AND ")}` : ""} ORDER BY address LIMIT ${limit}`,
        params,
      );
      return rows.map(toEntry);
    },
  };
}
