import type { Executor } from "./executor.js";

export function isSqliteDatabase(db: unknown): boolean {
  return typeof db === "object" && db !== null && typeof (db as { prepare?: unknown }).prepare === "function" && typeof (db as { pragma?: unknown }).pragma === "function";
}

export function createSqliteExecutor(_path: string): Executor {
  throw new Error("SQLite backend: not implemented yet");
}

export function wrapSqliteDatabase(_db: unknown): Executor {
  throw new Error("SQLite backend: not implemented yet");
}
