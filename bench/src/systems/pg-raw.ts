import pg from "pg";
import { PG_URL, SCHEMA } from "../lib/env.js";
import { mapLimit } from "../lib/stats.js";
import type { Payload, QueueSystem, StartOptions, WorkerHandle } from "./types.js";

const T = `${SCHEMA.raw}.jobs`;
const CHANNEL = "bench_raw";
export const RAW_BATCH = 100;

const CLAIM = `
  WITH picked AS (
    SELECT id FROM ${T} WHERE status = 'pending' AND queue = 'default' AND run_at <= now()
    ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
  )
  UPDATE ${T} AS j SET status = 'running', attempts = j.attempts + 1, locked_until = now() + interval '30 seconds'
  FROM picked WHERE j.id = picked.id
  RETURNING j.id, j.payload`;
const COMPLETE = `UPDATE ${T} SET status = 'done', finished_at = now(), locked_until = NULL WHERE id = ANY($1::bigint[])`;

/**
 * The ceiling: the least a SQL job table can do. One table with a primary key and one partial
 * claim index; claim up to 100 with FOR UPDATE SKIP LOCKED, run them, complete them in one
 * UPDATE; INSERT one by one, or one INSERT … SELECT FROM unnest for a batch; LISTEN/NOTIFY for
 * wake-ups. No leases extended, no retries, no fencing, no events.
 */
export class RawPgSystem implements QueueSystem {
  readonly id = "raw";
  readonly label = "raw SQL";
  readonly backend = "postgres" as const;
  readonly variants = { processing: ["batch100"], latency: "listen" };
  private pool!: pg.Pool;

  constructor(private readonly admin: pg.Client) {}

  describe(variant: string): string {
    if (variant === "listen") return "INSERT + pg_notify in one statement; LISTEN on a dedicated connection, claim on wake-up";
    return `claim ${RAW_BATCH} with FOR UPDATE SKIP LOCKED, run each, complete all in one UPDATE; 2 such loops (1 at concurrency 1)`;
  }

  async prepare(): Promise<void> {
    await this.admin.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA.raw}`);
    await this.admin.query(`
      CREATE TABLE IF NOT EXISTS ${T} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        queue text NOT NULL DEFAULT 'default',
        task text NOT NULL,
        payload jsonb,
        status text NOT NULL DEFAULT 'pending',
        attempts integer NOT NULL DEFAULT 0,
        run_at timestamptz NOT NULL DEFAULT now(),
        locked_until timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz
      )`);
    await this.admin.query(`CREATE INDEX IF NOT EXISTS raw_jobs_claim ON ${T} (queue, id) WHERE status = 'pending'`);
    this.pool = new pg.Pool({ connectionString: PG_URL, max: 10 });
    this.pool.on("error", () => undefined);
  }

  async reset(): Promise<void> {
    await this.admin.query(`TRUNCATE ${T} RESTART IDENTITY`);
  }

  async enqueueOne(payload: Payload): Promise<void> {
    await this.pool.query({ name: "raw_insert", text: `INSERT INTO ${T} (task, payload) VALUES ($1, $2)`, values: ["noop", JSON.stringify(payload)] });
  }

  /** With the NOTIFY that wakes a listening worker: what the latency measure enqueues. */
  async enqueueNotify(payload: Payload): Promise<void> {
    await this.pool.query({
      name: "raw_insert_notify",
      text: `WITH ins AS (INSERT INTO ${T} (task, payload) VALUES ($1, $2) RETURNING id) SELECT pg_notify('${CHANNEL}', '') FROM ins`,
      values: ["noop", JSON.stringify(payload)],
    });
  }

  async enqueueBulk(payloads: Payload[]): Promise<void> {
    await this.pool.query(`INSERT INTO ${T} (task, payload) SELECT 'noop', p FROM unnest($1::jsonb[]) AS p`, [payloads.map((p) => JSON.stringify(p))]);
  }

  async startWorker({ concurrency, onJob }: StartOptions): Promise<WorkerHandle> {
    const loops = Number(process.env.BENCH_RAW_LOOPS ?? (concurrency === 1 ? 1 : 2));
    const perLoop = Math.max(1, Math.floor(concurrency / loops));
    let stopped = false;
    const waiters = new Set<() => void>();
    let pendingWake = false;
    const wakeAll = () => {
      for (const w of [...waiters]) w();
    };
    const listener = new pg.Client({ connectionString: PG_URL });
    listener.on("error", () => undefined);
    await listener.connect();
    listener.on("notification", () => {
      pendingWake = true;
      wakeAll();
    });
    await listener.query(`LISTEN ${CHANNEL}`);
    const waitForWork = () =>
      new Promise<void>((resolve) => {
        if (pendingWake) return resolve();
        const done = () => {
          clearTimeout(timer);
          waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, 1000);
        waiters.add(done);
      });
    const clients = await Promise.all(Array.from({ length: loops }, () => this.pool.connect()));
    const run = async (client: pg.PoolClient) => {
      while (!stopped) {
        pendingWake = false;
        const { rows } = await client.query<{ id: string; payload: Payload }>({ name: "raw_claim", text: CLAIM, values: [RAW_BATCH] });
        if (rows.length === 0) {
          await waitForWork();
          continue;
        }
        await mapLimit(rows, perLoop, async (row) => onJob(row.payload));
        await client.query({ name: "raw_complete", text: COMPLETE, values: [rows.map((r) => r.id)] });
      }
    };
    const running = clients.map(run);
    return {
      stop: async () => {
        stopped = true;
        wakeAll();
        await Promise.all(running);
        clients.forEach((c) => c.release());
        await listener.end();
      },
    };
  }

  async unfinished(): Promise<number> {
    const { rows } = await this.admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${T} WHERE status IN ('pending', 'running')`);
    return Number(rows[0]!.n);
  }

  async close(): Promise<void> {
    await this.pool?.end();
  }
}
