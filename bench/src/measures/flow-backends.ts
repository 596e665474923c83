import { mkdirSync, rmSync } from "node:fs";
import type pg from "pg";
import { MARIADB_URL, PG_URL, SQLITE_DIR } from "../lib/env.js";
import type { ForgeAdmin } from "../systems/forge.js";
import { mariadbForgeAdmin } from "../systems/mariadb-raw.js";
import { pgForgeAdmin } from "../systems/pg-admin.js";
import { sqliteForgeAdmin } from "../systems/sqlite-raw.js";

export type Backend = "postgres" | "sqlite" | "mariadb";
/** BENCH_FLOW_BACKENDS=postgres,sqlite narrows the list while working on the harness. */
export const BACKENDS: Backend[] = (["postgres", "sqlite", "mariadb"] as const).filter(
  (b) => !process.env.BENCH_FLOW_BACKENDS || process.env.BENCH_FLOW_BACKENDS.split(",").includes(b),
);
export const BACKEND_TITLE: Record<Backend, string> = { postgres: "PostgreSQL", sqlite: "SQLite", mariadb: "MariaDB" };

/** Where ours runs for a flow measure: a fresh schema (PostgreSQL), file (SQLite) or database (MariaDB). */
export interface ForgeTarget {
  backend: Backend;
  url: string;
  schema: string | undefined;
  admin: ForgeAdmin;
  cleanup(): Promise<void>;
}

/**
 * `name` is the PostgreSQL schema (dropped by run.ts at every start), the SQLite file's name, or
 * the MariaDB database; the latter two are emptied here, so stored limits never carry over.
 */
export async function forgeTarget(admin: pg.Client, backend: Backend, name: string): Promise<ForgeTarget> {
  if (backend === "postgres") return { backend, url: PG_URL, schema: name, admin: pgForgeAdmin(admin), cleanup: async () => undefined };
  if (backend === "sqlite") {
    mkdirSync(SQLITE_DIR, { recursive: true });
    const file = `${SQLITE_DIR}/${name}.db`;
    for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
    const a = sqliteForgeAdmin(file);
    return { backend, url: `sqlite:${file}`, schema: undefined, admin: a, cleanup: async () => a.close() };
  }
  const a = mariadbForgeAdmin();
  try {
    await a.pool.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await a.pool.query(`CREATE DATABASE \`${name}\``);
  } catch (error) {
    await a.pool.end().catch(() => undefined);
    throw error;
  }
  return { backend, url: MARIADB_URL, schema: name, admin: a, cleanup: () => a.pool.end() };
}
