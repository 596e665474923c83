import { PgBoss } from "pg-boss";
import type pg from "pg";
import { PG_URL } from "../lib/env.js";
import { mapLimit } from "../lib/stats.js";
import type { Payload, QueueSystem, StartOptions, WorkerHandle } from "./types.js";

const QUEUE = "noop";

/**
 * pg-boss through its public API: send, insert, work/offWork. `notify` makes the instance
 * LISTEN and the queue NOTIFY (off by default in pg-boss); used for the latency measure.
 */
export class PgBossSystem implements QueueSystem {
  readonly id: string;
  readonly label: string;
  readonly backend = "postgres" as const;
  readonly variants = { processing: ["default", "tuned"], latency: "notify" };
  private boss!: PgBoss;

  constructor(
    private readonly admin: pg.Client,
    private readonly schema: string,
    private readonly notify: boolean,
  ) {
    this.id = notify ? "pgboss-notify" : "pgboss";
    this.label = notify ? "pg-boss (notify)" : "pg-boss";
  }

  describe(variant: string): string {
    if (variant === "tuned")
      return "work({ batchSize: 100, burstWhenBatchFull: true, perJobResults: true, localConcurrency: 2 }), the handler called once per job, at most `concurrency` at once";
    if (variant === "notify") return "new PgBoss({ useListenNotify: true }), createQueue({ notify: true }), work({ localConcurrency: concurrency })";
    return "work({ localConcurrency: concurrency }) with its defaults (batchSize 1, polling 2 s, no LISTEN)";
  }

  async prepare(): Promise<void> {
    this.boss = new PgBoss({ connectionString: PG_URL, schema: this.schema, useListenNotify: this.notify });
    this.boss.on("error", (error: Error) => console.error(`  ${this.label} error: ${error.message}`));
    await this.boss.start();
    if (!(await this.boss.getQueue(QUEUE))) await this.boss.createQueue(QUEUE, this.notify ? { notify: true } : {});
  }

  async reset(): Promise<void> {
    await this.admin.query(`TRUNCATE ${this.schema}.job`);
  }

  async enqueueOne(payload: Payload): Promise<void> {
    await this.boss.send(QUEUE, payload);
  }

  async enqueueBulk(payloads: Payload[]): Promise<void> {
    await this.boss.insert(
      QUEUE,
      payloads.map((data) => ({ data })),
    );
  }

  async startWorker({ concurrency, variant, onJob }: StartOptions): Promise<WorkerHandle> {
    let id: string;
    if (variant === "tuned") {
      const lanes = Math.min(Number(process.env.BENCH_PGBOSS_LANES ?? 2), concurrency);
      const perLane = Math.max(1, Math.floor(concurrency / lanes));
      id = await this.boss.work<Payload>(QUEUE, { batchSize: 100, burstWhenBatchFull: true, perJobResults: true, localConcurrency: lanes }, async (jobs) => {
        const results: { id: string; status: "completed" }[] = [];
        // One handler call per job, as for every other system, never more than `concurrency` at once.
        await mapLimit(jobs, perLane, async (job) => {
          await handler(job.data);
          results.push({ id: job.id, status: "completed" });
        });
        return results;
      });
    } else {
      id = await this.boss.work<Payload>(QUEUE, { localConcurrency: concurrency }, async ([job]) => {
        await handler(job!.data);
      });
    }
    async function handler(payload: Payload): Promise<void> {
      return onJob(payload);
    }
    return { stop: () => this.boss.offWork(QUEUE, { id, wait: true }) };
  }

  async unfinished(): Promise<number> {
    const { rows } = await this.admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${this.schema}.job WHERE name = $1 AND state IN ('created', 'retry', 'active')`,
      [QUEUE],
    );
    return Number(rows[0]!.n);
  }

  async close(): Promise<void> {
    await this.boss?.stop({ graceful: true, timeout: 5000 });
  }
}
