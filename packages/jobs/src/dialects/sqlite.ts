import { parseJsonText, type Dialect } from "./dialect.js";

/** The database clock in epoch milliseconds. julianday('now') works on every SQLite ≥ 3.35 (unixepoch('subsec') needs 3.42). */
const SQLITE_NOW = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

/**
 * The predicate of SQLite's jobs_finished partial index (migration 12), for a row `alias`:
 * comparisons, as SQLite fills a temporary B-tree for an IN list of three values every time it
 * tests a row against an index predicate (each claimed and each completed job). A query reads
 * the index only if its WHERE repeats this predicate.
 */
function sqliteFinished(alias = ""): string {
  const status = alias ? `${alias}.status` : "status";
  return `(${status} = 'done' OR ${status} = 'failed' OR ${status} = 'cancelled')`;
}

/** A random version-4 UUID, evaluated per row (claim tokens). */
const SQLITE_UUID =
  "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' || " +
  "substr('89ab', 1 + (random() & 3), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))";

/** Timestamps are INTEGER epoch milliseconds; JSON is TEXT; array parameters travel as JSON text. */
export const sqlite: Dialect = {
  name: "sqlite",
  now: SQLITE_NOW,
  nowPlus: (seconds, sign = "+") => `(${SQLITE_NOW} ${sign} CAST(ROUND(${seconds} * 1000.0) AS INTEGER))`,
  newToken: SQLITE_UUID,
  returning: true,
  // A single writer: BEGIN IMMEDIATE takes the write lock before a claim reads, so there is nothing to skip.
  skipLocked: false,
  readyOrder: "priority DESC, id",
  due: "due",
  notDue: "NOT due",
  boolean: (value) => (value ? 1 : 0),
  localClock: true,
  inList: (column, parameter) => `${column} IN (SELECT value FROM json_each(${parameter}))`,
  concat: (parts) => parts.join(" || "),
  isoTimestamp: (column) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${column} / 1000.0, 'unixepoch')`,
  epochMs: (column) => column,
  readJson: parseJsonText,
  finished: sqliteFinished,
  mariadb: null,
};
