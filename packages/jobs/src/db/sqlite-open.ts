import { loadDriver } from "./driver.js";
import type { Executor } from "./executor.js";
import { BUSY_RETRY_FOR_MS, SQLITE_BUSY_TIMEOUT_MS, isBusy } from "./sqlite-busy.js";
import { SqliteExecutor, isPrivateSqlite, isSqliteDatabase, type SqliteDatabase } from "./sqlite.js";

type SqliteConstructor = new (path: string, options?: { timeout?: number; readonly?: boolean; fileMustExist?: boolean }) => SqliteDatabase;

/**
 * Opens an SQLite file (or `:memory:`) in WAL mode with a busy timeout. `readOnly` opens an
 * existing file for reading only (it fails rather than create one) and leaves its mode as it is.
 */
export function createSqliteExecutor(path: string, { readOnly = false }: { readOnly?: boolean } = {}): Executor {
  const Database = loadDriver<SqliteConstructor>("better-sqlite3", "better-sqlite3@12", "The SQLite backend");
  const db = new Database(path, readOnly ? { timeout: SQLITE_BUSY_TIMEOUT_MS, readonly: true, fileMustExist: true } : { timeout: SQLITE_BUSY_TIMEOUT_MS });
  try {
    db.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
    if (!readOnly && !isPrivateSqlite(path)) setWal(db);
  } catch (error) {
    db.close();
    throw error;
  }
  return new SqliteExecutor(db, true);
}

/**
 * WAL: readers never wait for the writer, and the writer never waits for readers. Switching
 * needs a moment alone with the file; several processes opening a new file at once may find
 * it busy past busy_timeout, so this retries (synchronously: it runs once, at connect).
 */
function setWal(db: SqliteDatabase): void {
  const deadline = Date.now() + BUSY_RETRY_FOR_MS;
  for (;;) {
    try {
      db.pragma("journal_mode = WAL");
      return;
    } catch (error) {
      if (!isBusy(error) || Date.now() > deadline) throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
}

/**
 * The application's own better-sqlite3 Database. Its settings (journal mode, busy timeout —
 * better-sqlite3 defaults to 5 s) are left as they are. Inside the application's open
 * transaction, statements run in it; a worker's (`forWorker`) wait for it to end.
 */
export function wrapSqliteDatabase(db: unknown): Executor {
  if (!isSqliteDatabase(db)) throw new TypeError("not a better-sqlite3 Database");
  return new SqliteExecutor(db, false);
}
