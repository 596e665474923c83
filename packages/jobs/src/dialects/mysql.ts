import type { Executor } from "../db/executor.js";
import { finishedIn, parseJsonText, type Dialect, type MariadbOnly } from "./dialect.js";

/** The database clock: UTC whatever the session's time_zone, so a pool we did not configure reads and writes the same instants. */
const MYSQL_NOW = "UTC_TIMESTAMP(6)";

/** DATETIME(6) columns in UTC; no UPDATE … RETURNING; array parameters expand into lists (`IN ($1)`). */
export const mysql: Dialect = {
  name: "mysql",
  now: MYSQL_NOW,
  // Microsecond precision.
  nowPlus: (seconds, sign = "+") => `(${MYSQL_NOW} ${sign} INTERVAL ROUND(${seconds} * 1000000) MICROSECOND)`,
  // Random version-4 tokens made by the queue, as on the other backends (MariaDB's UUID() is
  // time-based), each set on its row with `valueForId`.
  newToken: null,
  returning: false,
  skipLocked: true,
  // neg_priority = -priority: the index walks priority DESC, id forwards.
  readyOrder: "neg_priority, id",
  due: "due = 1",
  notDue: "due = 0",
  boolean: (value) => (value ? 1 : 0),
  localClock: false,
  // An empty list is a syntax error (`IN ()`): callers never pass one.
  inList: (column, parameter) => `${column} IN (${parameter})`,
  concat: (parts) => `CONCAT(${parts.join(", ")})`,
  isoTimestamp: (column) => `CONCAT(DATE_FORMAT(${column}, '%Y-%m-%dT%H:%i:%s.'), LPAD(FLOOR(MICROSECOND(${column}) / 1000), 3, '0'), 'Z')`,
  epochMs: (column) => column,
  readJson: parseJsonText,
  finished: finishedIn,
  mariadb: { valueForId, refuseWarnings } satisfies MariadbOnly,
};

function valueForId(ids: string, values: string): string {
  return `ELT(FIELD(id, ${ids}), ${values})`;
}

/** ER_DUP_ENTRY: the one warning INSERT IGNORE may leave behind (a row skipped for its key). */
const DUPLICATE_ENTRY = 1062;

async function refuseWarnings(tx: Executor, duplicates: number): Promise<void> {
  const { rows } = await tx.query<{ n: number | string }>("SELECT @@warning_count AS n");
  if (Number(rows[0]?.n ?? 0) <= duplicates) return;
  const warnings = (await tx.query<{ Code: number | string; Message: string }>("SHOW WARNINGS")).rows;
  const other = warnings.find((w) => Number(w.Code) !== DUPLICATE_ENTRY);
  throw new Error(`MariaDB refused the insert: ${other ? `${other.Message} (warning ${other.Code})` : "it left unexpected warnings"}`);
}
