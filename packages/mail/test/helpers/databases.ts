import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";
import pg from "pg";
import type { SqlQuery, SuppressionDialect } from "../../src/index.js";

const PG_URL = process.env.FORGE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const MYSQL_URL = process.env.FORGE_TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test";

/** A place of its own on one real backend, reached through the `query` function an app would pass. */
export interface TestDatabase {
  dialect: SuppressionDialect;
  query: SqlQuery;
  /** Runs `work` with a `query` bound to one transaction, then commits or rolls back. */
  transaction<T>(work: (query: SqlQuery) => Promise<T>, outcome: "commit" | "rollback"): Promise<T>;
  close(): Promise<void>;
}

const unique = (prefix: string): string => `${prefix}_${randomBytes(5).toString("hex")}`;

async function postgres(): Promise<TestDatabase> {
  const schema = unique("mail");
  const admin = new pg.Pool({ connectionString: PG_URL, max: 1 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  const pool = new pg.Pool({ connectionString: PG_URL, max: 2, options: `-c search_path=${schema}` });
  const on =
    (client: pg.Pool | pg.PoolClient): SqlQuery =>
    async (sql, params) =>
      (await client.query(sql, [...params])).rows as Record<string, unknown>[];
  return {
    dialect: "postgres",
    query: on(pool),
    async transaction(work, outcome) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        const result = await work(on(client));
        await client.query(outcome === "commit" ? "COMMIT" : "ROLLBACK");
        return result;
      } finally {
        client.release();
      }
    },
    async close() {
      await pool.end();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    },
  };
}

async function sqlite(): Promise<TestDatabase> {
  const dir = mkdtempSync(join(tmpdir(), "forge-mail-"));
  const db = new Database(join(dir, "mail.db"));
  db.pragma("journal_mode = WAL");
  const query: SqlQuery = async (sql, params) => {
    const statement = db.prepare(sql);
    if (statement.reader) return statement.all(...params) as Record<string, unknown>[];
    statement.run(...params);
    return [];
  };
  return {
    dialect: "sqlite",
    query,
    async transaction(work, outcome) {
      db.exec("BEGIN IMMEDIATE");
      const result = await work(query);
      db.exec(outcome === "commit" ? "COMMIT" : "ROLLBACK");
      return result;
    },
    async close() {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function mariadb(): Promise<TestDatabase> {
  const name = unique("mail");
  const admin = await mysql.createConnection(MYSQL_URL);
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const pool = mysql.createPool({ uri: url.toString(), connectionLimit: 2 });
  const on =
    (client: mysql.Pool | mysql.PoolConnection): SqlQuery =>
    async (sql, params) => {
      const [rows] = await client.query(sql, [...params]);
      return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
    };
  return {
    dialect: "mariadb",
    query: on(pool),
    async transaction(work, outcome) {
      const connection = await pool.getConnection();
      try {
        await connection.query("BEGIN");
        const result = await work(on(connection));
        await connection.query(outcome === "commit" ? "COMMIT" : "ROLLBACK");
        return result;
      } finally {
        connection.release();
      }
    },
    async close() {
      await pool.end();
      await admin.query(`DROP DATABASE ${name}`);
      await admin.end();
    },
  };
}

const ALL: Array<{ name: string; create(): Promise<TestDatabase> }> = [
  { name: "postgres", create: postgres },
  { name: "sqlite", create: sqlite },
  { name: "mysql", create: mariadb },
];

/** The backends to run, from FORGE_TEST_BACKENDS (comma list, as the test services' setup sets it) or all. */
const wanted = process.env.FORGE_TEST_BACKENDS?.split(",").map((s) => s.trim());
export const BACKENDS = wanted ? ALL.filter((backend) => wanted.includes(backend.name)) : ALL;
