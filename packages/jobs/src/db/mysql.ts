import type { Executor } from "./executor.js";

export function isMysqlPool(db: unknown): boolean {
  return typeof db === "object" && db !== null && typeof (db as { getConnection?: unknown }).getConnection === "function";
}

export function isMysqlConnection(db: unknown): boolean {
  return typeof db === "object" && db !== null && typeof (db as { beginTransaction?: unknown }).beginTransaction === "function" && typeof (db as { execute?: unknown }).execute === "function";
}

export function createMysqlExecutor(_url: string): Executor {
  throw new Error("MariaDB backend: not implemented yet");
}

export function wrapMysqlPool(_db: unknown): Executor {
  throw new Error("MariaDB backend: not implemented yet");
}

export function wrapMysqlConnection(_db: unknown): Executor {
  throw new Error("MariaDB backend: not implemented yet");
}
