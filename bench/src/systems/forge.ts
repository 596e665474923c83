import { loadForge, type Forge } from "../forge.js";
import { Unavailable, type Payload, type QueueSystem, type StartOptions, type WorkerHandle } from "./types.js";

type JobsDb = ReturnType<Forge["connect"]>;

/** What the harness needs from the backend itself: empty the table, count what is left. */
export interface ForgeAdmin {
  reset: (table: string) => Promise<void>;
  unfinished: (table: string) => Promise<number>;
}

/** @forge/jobs through its public API, on any backend `connect()` takes. */
export class ForgeSystem implements QueueSystem {
  readonly variants = { processing: ["default"], latency: "default" };
  protected forge!: Forge;
  protected db!: JobsDb;

  constructor(
    readonly id: string,
    readonly label: string,
    readonly backend: "postgres" | "sqlite" | "mariadb",
    private readonly url: string,
    private readonly schema: string | undefined,
    private readonly admin: ForgeAdmin,
    private readonly workerOptions: Record<string, unknown> = {},
    /** Another build's dist/index.js to measure instead of the package (loadForge). */
    private readonly build?: string,
  ) {}

  describe(): string {
    return Object.keys(this.workerOptions).length ? `runWorker ${JSON.stringify(this.workerOptions)}` : "runWorker with its defaults (prefetch = concurrency)";
  }

  protected open(): JobsDb {
    return this.forge.connect(this.url, this.schema ? { schema: this.schema } : {});
  }

  async prepare(): Promise<void> {
    try {
      this.forge = await loadForge(this.build);
      this.db = this.open();
      await this.forge.migrate({ db: this.db });
    } catch (error) {
      await this.db?.close().catch(() => undefined);
      throw new Unavailable(`@forge/jobs on ${this.backend}: ${(error as Error).message.split("\n")[0]}`);
    }
  }

  /** The driver object under our connection (e.g. the better-sqlite3 Database). */
  get driver(): unknown {
    return (this.db?.executor as { raw?: unknown } | undefined)?.raw;
  }

  get table(): string {
    return this.db.table;
  }

  /**
   * Empties the live table and history together: a reset of the live table alone that restarts
   * its ids (TRUNCATE on MariaDB, RESTART IDENTITY on PostgreSQL) hands out ids history still
   * holds, and every completion then collides with an ended job's row. The dependency edges go
   * too, for the same reason: a restarted id would meet an old job's edge.
   */
  async reset(): Promise<void> {
    await this.admin.reset(this.db.table);
    await this.admin.reset(this.db.historyTable);
    await this.admin.reset(this.db.dependenciesTable);
  }

  async enqueueOne(payload: Payload): Promise<void> {
    await this.forge.enqueue("noop", payload, { db: this.db });
  }

  async enqueueBulk(payloads: Payload[]): Promise<void> {
    await this.forge.enqueueMany(
      payloads.map((payload) => ({ task: "noop", payload })),
      { db: this.db },
    );
  }

  async startWorker({ concurrency, onJob }: StartOptions): Promise<WorkerHandle> {
    const db = this.open();
    const controller = new AbortController();
    const worker = this.forge.createWorker(
      { noop: (payload: Payload) => onJob(payload) },
      { db, concurrency, signal: controller.signal, ...this.workerOptions },
    );
    const started = new Promise<void>((resolve) => worker.on("worker:started", () => resolve()));
    const running = worker.run();
    await Promise.race([started, running]);
    return {
      stop: async () => {
        controller.abort();
        await running;
        await db.close();
      },
    };
  }

  unfinished(): Promise<number> {
    return this.admin.unfinished(this.db.table);
  }

  async close(): Promise<void> {
    await this.db?.close();
  }
}
