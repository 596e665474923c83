import { Logger, makeWorkerUtils, run, type Runner, type WorkerUtils } from "graphile-worker";
import type pg from "pg";
import { PG_URL, SCHEMA } from "../lib/env.js";
import type { Payload, QueueSystem, StartOptions, WorkerHandle } from "./types.js";

const silent = new Logger(() => () => undefined);

/** graphile-worker through its public API: makeWorkerUtils (addJob, addJobs) and run(). */
export class GraphileSystem implements QueueSystem {
  readonly id = "graphile";
  readonly label = "graphile-worker";
  readonly backend = "postgres" as const;
  readonly variants = { processing: ["default", "tuned"], latency: "default" };
  private utils!: WorkerUtils;

  constructor(private readonly admin: pg.Client) {}

  describe(variant: string): string {
    return variant === "tuned"
      ? "run({ concurrency, preset: { worker: { localQueue: { size: 100 }, completeJobBatchDelay: 0, failJobBatchDelay: 0, maxPoolSize: max(10, concurrency + 2) } } }) (the pool its docs advise)"
      : "run({ concurrency }) with its defaults (pool 10, no local queue, no completion batching; LISTEN/NOTIFY)";
  }

  async prepare(): Promise<void> {
    this.utils = await makeWorkerUtils({ connectionString: PG_URL, schema: SCHEMA.graphile, logger: silent });
    await this.utils.migrate();
  }

  async reset(): Promise<void> {
    await this.admin.query(`TRUNCATE ${SCHEMA.graphile}._private_jobs, ${SCHEMA.graphile}._private_job_queues RESTART IDENTITY CASCADE`);
  }

  async enqueueOne(payload: Payload): Promise<void> {
    await this.utils.addJob("noop", payload);
  }

  async enqueueBulk(payloads: Payload[]): Promise<void> {
    await this.utils.addJobs(payloads.map((payload) => ({ identifier: "noop", payload })));
  }

  async startWorker({ concurrency, variant, onJob }: StartOptions): Promise<WorkerHandle> {
    const runner: Runner = await run({
      connectionString: PG_URL,
      schema: SCHEMA.graphile,
      concurrency,
      noHandleSignals: true,
      logger: silent,
      taskList: { noop: async (payload) => onJob(payload as Payload) },
      ...(variant === "tuned"
        ? { preset: { worker: { localQueue: { size: 100 }, completeJobBatchDelay: 0, failJobBatchDelay: 0, maxPoolSize: Math.max(10, concurrency + 2) } } }
        : {}),
    });
    return { stop: () => runner.stop() };
  }

  async unfinished(): Promise<number> {
    // graphile-worker deletes a job when it completes.
    const { rows } = await this.admin.query<{ n: string }>(`SELECT count(*) AS n FROM ${SCHEMA.graphile}._private_jobs`);
    return Number(rows[0]!.n);
  }

  async close(): Promise<void> {
    await this.utils?.release();
  }
}
