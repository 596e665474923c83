import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import mysql from "mysql2/promise";
import pg from "pg";
import type { Importer, JobContextLike, WriteCounts } from "../../src/index.js";
import { validatePerson, type Person } from "./people.js";

const PG_URL = process.env.IMPORT_EXPORT_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const MYSQL_URL = process.env.FORGE_TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test";

/** One statement on one connection; `?` placeholders on every backend. */
export type Query = (sql: string, params?: readonly unknown[]) => Promise<Record<string, unknown>[]>;

/**
 * A `people` table and a one-row `jobs` table on a real backend, and the queue's side of
 * `ctx.checkpoint` played with the plain driver: the work and the progress commit in one
 * transaction fenced by the claim token, and a throw rolls both back, as @forge/jobs does.
 */
export interface SqlJobBackend {
  name: "postgres" | "sqlite" | "mysql";
  /** Autocommit, on a connection of its own. */
  query: Query;
  context(progress: unknown): JobContextLike;
  readProgress(): Promise<Record<string, unknown> | null>;
  close(): Promise<void>;
}

const unique = (prefix: string): string => `${prefix}_${randomBytes(5).toString("hex")}`;

function dollarPlaceholders(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

const CLAIM_TOKEN = "claim-1";

function checkpointOn(query: Query, transaction: { begin: string; commit: string; rollback: string }): JobContextLike["checkpoint"] {
  return async (next, work) => {
    await query(transaction.begin);
    try {
      const result: unknown = work ? await work(query) : undefined;
      const value: unknown = typeof next === "function" ? (next as (r: unknown) => unknown)(result) : next;
      await query("UPDATE jobs SET progress = ? WHERE id = 1 AND claim_token = ?", [JSON.stringify(value), CLAIM_TOKEN]);
      const [owned] = await query("SELECT count(*) AS n FROM jobs WHERE id = 1 AND claim_token = ?", [CLAIM_TOKEN]);
      if (Number(owned!.n) === 0) {
        await query(transaction.rollback);
        return false;
      }
      await query(transaction.commit);
      return true;
    } catch (error) {
      await query(transaction.rollback).catch(() => undefined);
      throw error;
    }
  };
}

function contextFor(query: Query, checkpoint: JobContextLike["checkpoint"], progress: unknown): JobContextLike {
  return {
    job: { id: 1, task: "forge.import.csv", queue: "default", attempt: 1, maxAttempts: 3 },
    progress,
    heartbeat: async () => true,
    checkpoint,
  };
}

async function readProgress(query: Query): Promise<Record<string, unknown> | null> {
  const [row] = await query("SELECT progress FROM jobs WHERE id = 1");
  const text = row?.progress;
  return typeof text === "string" ? (JSON.parse(text) as Record<string, unknown>) : null;
}

async function createTables(query: Query, text: string): Promise<void> {
  await query(`CREATE TABLE people (id integer PRIMARY KEY, name varchar(100) NOT NULL, email varchar(200) NOT NULL UNIQUE, note ${text} NOT NULL)`);
  await query(`CREATE TABLE jobs (id integer PRIMARY KEY, claim_token varchar(100) NOT NULL, progress ${text})`);
  await query("INSERT INTO jobs (id, claim_token) VALUES (1, ?)", [CLAIM_TOKEN]);
}

async function postgres(): Promise<SqlJobBackend> {
  const schema = unique("ie_sql");
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const connect = async (): Promise<{ client: pg.Client; query: Query }> => {
    const client = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${schema}` });
    await client.connect();
    return { client, query: async (sql, params = []) => (await client.query(dollarPlaceholders(sql), [...params])).rows as Record<string, unknown>[] };
  };
  const own = await connect();
  const worker = await connect();
  await createTables(own.query, "text");
  const checkpoint = checkpointOn(worker.query, { begin: "BEGIN", commit: "COMMIT", rollback: "ROLLBACK" });
  return {
    name: "postgres",
    query: own.query,
    context: (progress) => contextFor(worker.query, checkpoint, progress),
    readProgress: () => readProgress(own.query),
    async close() {
      await own.client.end();
      await worker.client.end();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    },
  };
}

async function sqlite(): Promise<SqlJobBackend> {
  const dir = mkdtempSync(path.join(tmpdir(), "forge-ie-sql-"));
  const databases: Database.Database[] = [];
  const open = (): Query => {
    const db = new Database(path.join(dir, "import.db"));
    db.pragma("journal_mode = WAL");
    db.pragma("busy_timeout = 5000");
    databases.push(db);
    return async (sql, params = []) => {
      const statement = db.prepare(sql);
      if (statement.reader) return statement.all(...params) as Record<string, unknown>[];
      statement.run(...params);
      return [];
    };
  };
  const own = open();
  const worker = open();
  await createTables(own, "text");
  const checkpoint = checkpointOn(worker, { begin: "BEGIN IMMEDIATE", commit: "COMMIT", rollback: "ROLLBACK" });
  return {
    name: "sqlite",
    query: own,
    context: (progress) => contextFor(worker, checkpoint, progress),
    readProgress: () => readProgress(own),
    async close() {
      for (const db of databases) db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function mariadb(): Promise<SqlJobBackend> {
  const name = unique("ie_sql");
  const admin = await mysql.createConnection(MYSQL_URL);
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const connect = async (): Promise<{ connection: mysql.Connection; query: Query }> => {
    const connection = await mysql.createConnection(url.toString());
    return {
      connection,
      query: async (sql, params = []) => {
        const [rows] = await connection.query(sql, [...params]);
        return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
      },
    };
  };
  const own = await connect();
  const worker = await connect();
  await createTables(own.query, "text");
  const checkpoint = checkpointOn(worker.query, { begin: "BEGIN", commit: "COMMIT", rollback: "ROLLBACK" });
  return {
    name: "mysql",
    query: own.query,
    context: (progress) => contextFor(worker.query, checkpoint, progress),
    readProgress: () => readProgress(own.query),
    async close() {
      await own.connection.end();
      await worker.connection.end();
      await admin.query(`DROP DATABASE ${name}`);
      await admin.end();
    },
  };
}

const ALL: Array<{ name: SqlJobBackend["name"]; create(): Promise<SqlJobBackend> }> = [
  { name: "postgres", create: postgres },
  { name: "sqlite", create: sqlite },
  { name: "mysql", create: mariadb },
];

/** The backends to run, from FORGE_TEST_BACKENDS (comma list) or all three. */
const wanted = process.env.FORGE_TEST_BACKENDS?.split(",").map((s) => s.trim());
export const SQL_BACKENDS = wanted ? ALL.filter((backend) => wanted.includes(backend.name)) : ALL;

/**
 * An upsert by id that says what it did (the natural-key contract), in SQL all three
 * backends run alike. New ids are INSERTed rather than upserted: MariaDB's ON DUPLICATE KEY
 * would turn a clash on the unique email into an update of another row instead of an error.
 */
export function sqlUpsertImporter(): Importer<Person, Query> {
  return {
    validate: validatePerson,
    naturalKey: ["id"],
    async writeBatch(values, tx): Promise<WriteCounts> {
      const query = tx!;
      const ids = values.map((v) => v.id);
      const rows = await query(`SELECT id, name, email, note FROM people WHERE id IN (${ids.map(() => "?").join(", ")})`, ids);
      const before = new Map(rows.map((r) => [Number(r.id), r]));
      const counts = { created: 0, updated: 0, unchanged: 0 };
      for (const v of values) {
        const old = before.get(v.id);
        if (old === undefined) {
          counts.created += 1;
          await query("INSERT INTO people (id, name, email, note) VALUES (?, ?, ?, ?)", [v.id, v.name, v.email, v.note]);
        } else if (old.name === v.name && old.email === v.email && old.note === v.note) {
          counts.unchanged += 1;
        } else {
          counts.updated += 1;
          await query("UPDATE people SET name = ?, email = ?, note = ? WHERE id = ?", [v.name, v.email, v.note, v.id]);
        }
      }
      return counts;
    },
  };
}
