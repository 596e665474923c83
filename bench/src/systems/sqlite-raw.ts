import Database from "better-sqlite3";
import { mkdirSync, rmSync } from "node:fs";
import { SQLITE_DIR } from "../lib/env.js";
import { mapLimit, sleep } from "../lib/stats.js";
import type { ForgeAdmin } from "./forge.js";
import type { Payload, QueueSystem, StartOptions, WorkerHandle } from "./types.js";

export const RAW_SQLITE_POLL_MS = 5;

/**
 * Opened as @forge/jobs opens its file: WAL, a busy timeout, and better-sqlite3's own default
 * synchronous level (NORMAL for a connection that opens a file already in WAL mode).
 */
function open(file: string): Database.Database {
  const db = new Database(file, { timeout: 5000 });
  db.pragma("journal_mode = WAL");
  return db;
}

export function synchronousLevel(db: { pragma(s: string, o: { simple: true }): unknown }): string {
  return ["OFF", "NORMAL", "FULL", "EXTRA"][Number(db.pragma("synchronous", { simple: true }))] ?? "?";
}

/**
 * The SQLite ceiling: better-sqlite3 opened like ours (WAL, driver-default synchronous), one table with a partial claim index; claim 100 with one UPDATE … WHERE id IN (SELECT … LIMIT
 * 100) RETURNING, complete them in one UPDATE; the worker on its own connection polls every
 * 5 ms when it finds nothing (SQLite has no push).
 */
export class RawSqliteSystem implements QueueSystem {
  readonly id = "raw";
  readonly label = "raw SQL (better-sqlite3)";
  readonly backend = "sqlite" as const;
  readonly variants = { processing: ["batch100"], latency: "poll" };
  private db!: Database.Database;
  private readonly file = `${SQLITE_DIR}/raw.db`;

  describe(variant: string): string {
    return variant === "poll"
      ? `INSERT; the worker (own connection) claims on a ${RAW_SQLITE_POLL_MS} ms poll`
      : "claim 100 (UPDATE … WHERE id IN (SELECT … LIMIT 100) RETURNING), run each, complete all in one UPDATE";
  }

  async prepare(): Promise<void> {
    mkdirSync(SQLITE_DIR, { recursive: true });
    for (const suffix of ["", "-wal", "-shm"]) rmSync(this.file + suffix, { force: true });
    // Create the file and switch it to WAL first, so every working connection opens a WAL file.
    const setup = open(this.file);
    setup.close();
    this.db = open(this.file);
    this.db.exec(`
      CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        queue TEXT NOT NULL DEFAULT 'default',
        task TEXT NOT NULL,
        payload TEXT,
        status TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        run_at INTEGER NOT NULL DEFAULT (unixepoch('subsec') * 1000),
        locked_until INTEGER,
        finished_at INTEGER
      );
      CREATE INDEX jobs_claim ON jobs (queue, id) WHERE status = 'pending';`);
  }

  async reset(): Promise<void> {
    this.db.exec("DELETE FROM jobs");
  }

  get synchronous(): string {
    return synchronousLevel(this.db);
  }

  async enqueueOne(payload: Payload): Promise<void> {
    this.db.prepare("INSERT INTO jobs (task, payload) VALUES (?, ?)").run("noop", JSON.stringify(payload));
  }

  async enqueueBulk(payloads: Payload[]): Promise<void> {
    const insert = this.db.prepare("INSERT INTO jobs (task, payload) VALUES (?, ?)");
    this.db.transaction((items: Payload[]) => {
      for (const p of items) insert.run("noop", JSON.stringify(p));
    })(payloads);
  }

  async startWorker({ concurrency, onJob }: StartOptions): Promise<WorkerHandle> {
    const db = open(this.file);
    const claim = db.prepare(`
      UPDATE jobs SET status = 'running', attempts = attempts + 1, locked_until = ?
      WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' AND queue = 'default' AND run_at <= ? ORDER BY id LIMIT 100)
      RETURNING id, payload`);
    const complete = db.prepare("UPDATE jobs SET status = 'done', finished_at = ?, locked_until = NULL WHERE id IN (SELECT value FROM json_each(?))");
    let stopped = false;
    const loop = (async () => {
      while (!stopped) {
        const now = Date.now();
        const rows = claim.all(now + 30_000, now) as { id: number; payload: string }[];
        if (rows.length === 0) {
          await sleep(RAW_SQLITE_POLL_MS);
          continue;
        }
        await mapLimit(rows, concurrency, async (row) => onJob(JSON.parse(row.payload) as Payload));
        complete.run(Date.now(), JSON.stringify(rows.map((r) => r.id)));
        await new Promise((r) => setImmediate(r));
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        await loop;
        db.close();
      },
    };
  }

  async unfinished(): Promise<number> {
    return (this.db.prepare("SELECT count(*) AS n FROM jobs WHERE status IN ('pending', 'running')").get() as { n: number }).n;
  }

  async close(): Promise<void> {
    this.db?.close();
  }
}

/** Reset and count for @forge/jobs's SQLite file, through a connection of our own. */
export function sqliteForgeAdmin(file: string): ForgeAdmin & { close(): void } {
  let db: Database.Database | null = null;
  const get = () => (db ??= open(file));
  return {
    reset: async (table) => {
      get().exec(`DELETE FROM ${table}`);
    },
    unfinished: async (table) => (get().prepare(`SELECT count(*) AS n FROM ${table} WHERE status IN ('pending', 'running')`).get() as { n: number }).n,
    close: () => db?.close(),
  };
}
