import type { DialectName } from "../db/executor.js";
import { isMissingPartition } from "./sql-errors.js";

/**
 * PostgreSQL SQLSTATE classes 22 (data exception: bad encoding, value too long…), 23
 * (integrity constraint violation: a CHECK of the application's) and 54 (program limit
 * exceeded: too large, too deep), and P0001 (an exception raised by a trigger).
 */
const POSTGRES = /^(22|23|54)[0-9A-Z]{3}$|^P0001$/;
/**
 * MariaDB: column cannot be null (1048), packet too large (1153), out of range (1264), result
 * over max_allowed_packet (1301), incorrect string value (1366), data too long (1406), SIGNAL
 * from a trigger (1644), invalid JSON (3140), CHECK constraint failed (4025).
 */
const MYSQL = new Set([1048, 1153, 1264, 1301, 1366, 1406, 1644, 3140, 4025]);
/** SQLite: a constraint or a trigger's RAISE, a string or blob too big, a datatype mismatch. */
const SQLITE = /^SQLITE_(CONSTRAINT|TOOBIG|MISMATCH)/;

/**
 * True when the database refused a write for the values it carried: the same statement can
 * only fail again, so it must not be retried as if the server had been away. Anything else
 * (a lost connection, a deadlock, a timeout) may pass, and is retried.
 */
export function refusedForItsValues(dialect: DialectName, error: unknown): boolean {
  const { code, errno } = (typeof error === "object" && error !== null ? error : {}) as { code?: unknown; errno?: unknown };
  switch (dialect) {
    case "postgres":
      // A missing history partition is not the row's fault: the next try makes it (run/ended.ts).
      return typeof code === "string" && POSTGRES.test(code) && !isMissingPartition(error);
    case "mysql":
      return typeof errno === "number" && MYSQL.has(errno);
    case "sqlite":
      return typeof code === "string" && SQLITE.test(code);
  }
}
