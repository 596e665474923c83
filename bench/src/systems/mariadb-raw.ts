import mysql from "mysql2/promise";
import { MARIADB_URL } from "../lib/env.js";
import { mapLimit, sleep } from "../lib/stats.js";
import type { ForgeAdmin } from "./forge.js";
import type { Payload, QueueSystem, StartOptions, WorkerHandle } from "./types.js";

export const RAW_MARIADB_DB = "bench_raw";
export const RAW_MARIADB_POLL_MS = 5;
const T = `\`${RAW_MARIADB_DB}\`.jobs`;

/**
 * The MariaDB ceiling: InnoDB (innodb_flush_log_at_trx_commit as the server has it), one
 * table with a (status, queue, id) index; claim 100 with SELECT … FOR UPDATE SKIP LOCKED + UPDATE
 * in one transaction, complete them in one UPDATE; 2 loops (1 at concurrency 1); a 5 ms poll
 * when idle (MariaDB has no push).
 */
export class RawMariaDbSystem implements QueueSystem {
  readonly id = "raw";
  readonly label = "raw SQL (mysql2)";
  readonly backend = "mariadb" as const;
  readonly variants = { processing: ["batch100"], latency: "poll" };
  private pool!: mysql.Pool;

  describe(variant: string): string {
    return variant === "poll"
      ? `INSERT; the worker claims on a ${RAW_MARIADB_POLL_MS} ms poll`
      : "claim 100 (SELECT … FOR UPDATE SKIP LOCKED, UPDATE, COMMIT), run each, complete all in one UPDATE; 2 loops";
  }

  async prepare(): Promise<void> {
    this.pool = mysql.createPool({ uri: MARIADB_URL, connectionLimit: 10 });
    await this.pool.query(`CREATE DATABASE IF NOT EXISTS \`${RAW_MARIADB_DB}\``);
    await this.pool.query(`DROP TABLE IF EXISTS ${T}`);
    await this.pool.query(`
      CREATE TABLE ${T} (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        queue VARCHAR(128) NOT NULL DEFAULT 'default',
        task VARCHAR(128) NOT NULL,
        payload LONGTEXT,
        status VARCHAR(16) NOT NULL DEFAULT 'pending',
        attempts INT NOT NULL DEFAULT 0,
        run_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        locked_until DATETIME(6),
        finished_at DATETIME(6),
        INDEX jobs_claim (status, queue, id)
      ) ENGINE=InnoDB`);
  }

  async reset(): Promise<void> {
    await this.pool.query(`TRUNCATE TABLE ${T}`);
  }

  query(sql: string): Promise<[mysql.RowDataPacket[], unknown]> {
    return this.pool.query<mysql.RowDataPacket[]>(sql);
  }

  async enqueueOne(payload: Payload): Promise<void> {
    await this.pool.execute(`INSERT INTO ${T} (task, payload) VALUES (?, ?)`, ["noop", JSON.stringify(payload)]);
  }

  async enqueueBulk(payloads: Payload[]): Promise<void> {
    await this.pool.query(`INSERT INTO ${T} (task, payload) VALUES ?`, [payloads.map((p) => ["noop", JSON.stringify(p)])]);
  }

  async startWorker({ concurrency, onJob }: StartOptions): Promise<WorkerHandle> {
    const loops = concurrency === 1 ? 1 : 2;
    const perLoop = Math.max(1, Math.floor(concurrency / loops));
    let stopped = false;
    const conns = await Promise.all(Array.from({ length: loops }, () => this.pool.getConnection()));
    const run = async (conn: mysql.PoolConnection) => {
      while (!stopped) {
        await conn.beginTransaction();
        const [rows] = await conn.query<mysql.RowDataPacket[]>(
          `SELECT id, payload FROM ${T} WHERE status = 'pending' AND queue = 'default' AND run_at <= NOW(6) ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED`,
        );
        if (rows.length === 0) {
          await conn.commit();
          await sleep(RAW_MARIADB_POLL_MS);
          continue;
        }
        const ids = rows.map((r) => r.id as number);
        await conn.query(`UPDATE ${T} SET status = 'running', attempts = attempts + 1, locked_until = NOW(6) + INTERVAL 30 SECOND WHERE id IN (?)`, [ids]);
        await conn.commit();
        await mapLimit(rows, perLoop, async (row) => onJob(JSON.parse(row.payload as string) as Payload));
        await conn.query(`UPDATE ${T} SET status = 'done', finished_at = NOW(6), locked_until = NULL WHERE id IN (?)`, [ids]);
      }
    };
    const running = conns.map(run);
    return {
      stop: async () => {
        stopped = true;
        await Promise.all(running);
        conns.forEach((c) => c.release());
      },
    };
  }

  async unfinished(): Promise<number> {
    const [rows] = await this.pool.query<mysql.RowDataPacket[]>(`SELECT count(*) AS n FROM ${T} WHERE status IN ('pending', 'running')`);
    return Number(rows[0]!.n);
  }

  async close(): Promise<void> {
    await this.pool?.end();
  }
}

/** Reset and count for @forge/jobs's MariaDB table, through a connection of our own. */
export function mariadbForgeAdmin(): ForgeAdmin & { pool: mysql.Pool } {
  const pool = mysql.createPool({ uri: MARIADB_URL, connectionLimit: 2 });
  return {
    pool,
    reset: async (table) => {
      await pool.query(`TRUNCATE TABLE ${table}`);
    },
    unfinished: async (table) => {
      const [rows] = await pool.query<mysql.RowDataPacket[]>(`SELECT count(*) AS n FROM ${table} WHERE status IN ('pending', 'running')`);
      return Number(rows[0]!.n);
    },
  };
}
