import { waitFor, type TestDatabase } from "../../helpers/backends.js";
import type { WorkerConfig } from "../fixtures/worker.js";
import { Child, fixture, killAll, type Exit } from "./children.js";

/**
 * A fixed number of worker processes (fixtures/worker.ts), one per slot, each restartable.
 * With `supervise`, a slot whose process exits is restarted at once, as a process manager
 * (systemd, Kubernetes) would. Worker ids are `<prefix><slot>.<generation>`; `env` adds
 * environment variables per slot.
 */
export class Fleet {
  /** Every process ever started, for the final cleanup. */
  readonly all: Child[] = [];
  readonly slots: Child[] = [];
  private readonly generation: number[];
  private stopping = false;

  constructor(
    private readonly base: Omit<WorkerConfig, "workerId">,
    size: number,
    private readonly options: { prefix?: string; supervise?: boolean; env?: (slot: number) => Record<string, string> } = {},
  ) {
    this.generation = new Array<number>(size).fill(0);
    for (let slot = 0; slot < size; slot++) this.start(slot);
  }

  /** (Re)starts the worker of `slot`. */
  start(slot: number): Child {
    const workerId = `${this.options.prefix ?? "w"}${slot}.${++this.generation[slot]!}`;
    const child = new Child(workerId, [fixture("worker.ts"), JSON.stringify({ ...this.base, workerId } satisfies WorkerConfig)], this.options.env?.(slot));
    this.all.push(child);
    this.slots[slot] = child;
    if (this.options.supervise) {
      void child.exited.then(() => {
        if (!this.stopping && this.slots[slot] === child) this.start(slot);
      });
    }
    return child;
  }

  /** Processes that died without being asked to stop (supervised restarts). */
  get deaths(): number {
    return this.all.filter((c) => c.exit !== null && c.exit.signal !== "SIGTERM" && c.exit.code !== 0).length;
  }

  /** Waits until every slot's current process has said "started". */
  async started(): Promise<void> {
    await Promise.all(this.slots.map((c) => c.waitForMessage("started", (m) => m.type === "worker:started")));
  }

  /** Graceful stop of every live slot (booting ones first finish booting); their exits. */
  async stop(): Promise<Exit[]> {
    this.stopping = true;
    const live = this.slots.filter((c) => c.running);
    await Promise.all(live.map((c) => c.waitForMessage("started", (m) => m.type === "worker:started")));
    return Promise.all(live.map((c) => c.stop()));
  }

  /** Cleanup: SIGKILL whatever is left. */
  async kill(): Promise<void> {
    this.stopping = true;
    await killAll(this.all);
  }
}

/**
 * A live process of `fleet`, chosen at random among those holding a started job of `queue`, and
 * its slot: the victim of a kill that lands mid-run. Waits (polling) until there is one.
 */
/**
 * A live worker of the fleet that holds a started job of `queue`, picked at random. `keepBusy`,
 * called on each look that found none, lets a test add work: on a loaded machine the test's own
 * polls can come so late that every job has ended, and then no worker would ever hold one.
 */
export function workerRunningJob(
  t: TestDatabase,
  fleet: Fleet,
  queue: string,
  timeoutMs: number,
  keepBusy?: () => Promise<void>,
): Promise<{ c: Child; slot: number }> {
  return waitFor(
    "a live worker running a job",
    async () => {
      const rows = await t.sql<{ locked_by: string }>(
        `SELECT DISTINCT locked_by FROM {jobs} WHERE status = 'running' AND started_at IS NOT NULL AND queue = $1`,
        [queue],
      );
      const holding = new Set(rows.map((r) => r.locked_by));
      const candidates = fleet.slots.map((c, slot) => ({ c, slot })).filter(({ c }) => c.running && holding.has(c.label));
      if (candidates.length) return candidates[Math.floor(Math.random() * candidates.length)];
      await keepBusy?.();
      return undefined;
    },
    timeoutMs,
  );
}
