import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, migrate, type JobsDatabase } from "@forge/jobs";

export type Backend = "postgres" | "sqlite" | "mysql";

const PG_URL = process.env.FORGE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const MYSQL_URL = process.env.FORGE_TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test";

/** The backends this run has (the root global setup leaves out a server that does not answer). */
export function backends(): Backend[] {
  const wanted = process.env.FORGE_TEST_BACKENDS?.split(",").map((s) => s.trim());
  return (["postgres", "sqlite", "mysql"] as const).filter((b) => !wanted || wanted.includes(b));
}

/**
 * A database of its own for one test file, the queue migrated into its default schema (so the
 * README's examples need no `schema` option) and the application's `orders` table beside it.
 */
export interface Target {
  backend: Backend;
  /** postgres://…/db, mysql://…/db, or sqlite:<file>: what the ORM and the queue connect to. */
  url: string;
  /** The SQLite file (sqlite only). */
  file: string;
  /** The queue's own connection: the worker side, and the test's eye outside the transaction. */
  queue: JobsDatabase;
  /** Raw SQL on the queue's connection, `$n` placeholders. */
  sql<R extends object = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  orders(): Promise<string[]>;
  drop(): Promise<void>;
}

const ORDERS: Record<Backend, string> = {
  postgres: "CREATE TABLE orders (id serial PRIMARY KEY, item text NOT NULL)",
  sqlite: "CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, item TEXT NOT NULL)",
  mysql: "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, item VARCHAR(200) NOT NULL) ENGINE=InnoDB",
};

async function admin(url: string, statement: string): Promise<void> {
  const db = connect(url);
  try {
    await db.executor.query(statement);
  } finally {
    await db.close();
  }
}

export async function createTarget(backend: Backend): Promise<Target> {
  const name = `orm_${randomBytes(5).toString("hex")}`;
  let url: string;
  let file = "";
  let drop: () => Promise<void>;
  if (backend === "postgres") {
    await admin(PG_URL, `CREATE DATABASE ${name}`);
    url = PG_URL.replace(/\/[^/]*$/, `/${name}`);
    drop = () => admin(PG_URL, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } else if (backend === "mysql") {
    await admin(MYSQL_URL, `CREATE DATABASE ${name}`);
    url = MYSQL_URL.replace(/\/[^/]*$/, `/${name}`);
    drop = () => admin(MYSQL_URL, `DROP DATABASE IF EXISTS ${name}`);
  } else {
    const dir = mkdtempSync(join(tmpdir(), "forge-orm-"));
    file = join(dir, "app.db");
    url = `sqlite:${file}`;
    drop = async () => rmSync(dir, { recursive: true, force: true });
  }
  const queue = connect(url);
  await migrate({ db: queue });
  await queue.executor.query(ORDERS[backend]);
  const sql = async <R extends object>(text: string, params?: unknown[]) => (await queue.executor.query<R>(text, params)).rows;
  return {
    backend,
    url,
    file,
    queue,
    sql,
    orders: async () => (await sql<{ item: string }>("SELECT item FROM orders ORDER BY id")).map((r) => r.item),
    drop: async () => {
      await queue.close();
      await drop();
    },
  };
}
