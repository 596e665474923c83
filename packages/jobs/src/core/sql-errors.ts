import type { DialectName } from "../db/executor.js";
import { isRetryable as mysqlLockConflict } from "../db/mysql.js";
import { isBusy } from "../db/sqlite-busy.js";

/** What a driver error says, read the same way on every backend. */
function errorCode(error: unknown): { code: unknown; errno: unknown } {
  const e = (typeof error === "object" && error !== null ? error : {}) as { code?: unknown; errno?: unknown };
  return { code: e.code, errno: e.errno };
}

/** A unique index refused the write (PostgreSQL 23505, SQLite SQLITE_CONSTRAINT_UNIQUE, MariaDB ER_DUP_ENTRY). */
export function isUniqueViolation(error: unknown, dialect: DialectName): boolean {
  const { code, errno } = errorCode(error);
  if (dialect === "postgres") return code === "23505";
  if (dialect === "sqlite") return code === "SQLITE_CONSTRAINT_UNIQUE";
  return errno === 1062;
}

/**
 * The transaction's snapshot cannot see a row the statement ran into: PostgreSQL 40001 under
 * REPEATABLE READ or SERIALIZABLE, MariaDB ER_CHECKREAD (1020) with innodb_snapshot_isolation.
 */
export function isSerializationFailure(error: unknown, dialect: DialectName): boolean {
  const { code, errno } = errorCode(error);
  if (dialect === "postgres") return code === "40001";
  if (dialect === "mysql") return errno === 1020;
  return false;
}

/**
 * The transaction lost on locks, not on its data: a deadlock (PostgreSQL 40P01, MariaDB 1213),
 * a lock wait past its timeout (PostgreSQL 55P03 under lock_timeout, MariaDB 1205), SQLite's
 * write lock still busy after the executor's own retries. Running it again is the remedy.
 */
export function isLockConflict(error: unknown, dialect: DialectName): boolean {
  const { code } = errorCode(error);
  if (dialect === "postgres") return code === "40P01" || code === "55P03";
  if (dialect === "mysql") return mysqlLockConflict(error);
  return isBusy(error);
}

/**
 * PostgreSQL's refusal of a row no history partition holds (23514 "no partition of relation …
 * found for row": a day made ready too late, or partitions dropped by hand). Not the row's
 * fault: the write is retried like an outage once the partition is made. The same code with
 * another message is a CHECK constraint, which is the row's fault.
 */
export function isMissingPartition(error: unknown): boolean {
  const { code } = errorCode(error);
  const message = (error as { message?: unknown } | null)?.message;
  return code === "23514" && typeof message === "string" && message.includes("no partition");
}

/**
 * The refusal of an ending write by history's primary key (MariaDB, SQLite): the live table's
 * ids restarted below history's (run/reused-ids.ts). PostgreSQL's history has no unique id.
 */
export function isHistoryIdTaken(error: unknown, dialect: DialectName, historyTable: string): boolean {
  const { code, errno } = errorCode(error);
  const message = (error as { message?: unknown } | null)?.message;
  const text = typeof message === "string" ? message : "";
  if (dialect === "mysql") return errno === 1062 && /for key '(?:[^']*\.)?PRIMARY'/.test(text);
  if (dialect === "sqlite") return typeof code === "string" && code.startsWith("SQLITE_CONSTRAINT") && text.includes(`${historyTable}.id`);
  return false;
}
