import { hostname } from "node:os";
import type { JobsDatabase } from "../core/database.js";
import { isMissingTable } from "../flow/flow-overview.js";
import { EXTENSIONS_PER_LEASE } from "../run/lease.js";
import { repeat } from "../base/timers.js";

/** What a worker says of itself in the registry (migration 17's jobs_workers). */
export interface WorkerIdentity {
  id: string;
  queues: readonly string[];
  concurrency: number;
  /** Seconds: a row whose heartbeat is older than this is a worker lost. */
  lease: number;
}

/**
 * A worker's row in jobs_workers: written at its start, its heartbeat refreshed at the lease
 * keeper's cadence (a few times per lease, whatever the number of jobs), deleted on a clean
 * stop. A worker killed leaves its row, which the dashboard shows as lost once the heartbeat is
 * older than the lease. The timer and `remove` belong to the worker that owns this object;
 * a beat in flight is awaited by `remove`, so no late beat writes the row back after it.
 */
export class WorkerRegistry {
  private readonly table: string;
  private beat: Promise<void> = Promise.resolve();
  private removed = false;
  /** The schema predates migration 17: the worker runs without a row, and says nothing of it. */
  private absent = false;

  constructor(
    private readonly db: JobsDatabase,
    private readonly identity: WorkerIdentity,
  ) {
    this.table = db.workersTable;
  }

  /**
   * Writes the row, all of it (a worker restarted under the same id starts afresh); a failure is
   * reported to `onError`, never thrown (the worker runs without its row).
   */
  register(onError: (error: unknown) => void): Promise<void> {
    return (this.beat = this.write(true)).catch(onError);
  }

  /** One heartbeat: the row's `heartbeat_at` now (the row written again if someone removed it). */
  heartbeat(): Promise<void> {
    return (this.beat = this.write(false));
  }

  /** Refreshes the heartbeat a few times per lease; the timer is the worker's to clear. */
  keep(maintenance: { active: () => boolean; onError: (error: unknown) => void }): NodeJS.Timeout {
    return repeat((this.identity.lease * 1000) / EXTENSIONS_PER_LEASE, () => this.heartbeat(), maintenance);
  }

  /** Deletes the row (a clean stop), after any beat in flight. */
  async remove(): Promise<void> {
    this.removed = true;
    await this.beat.catch(() => undefined);
    if (this.absent) return;
    await this.db.executor.query(`DELETE FROM ${this.table} WHERE id = $1`, [this.identity.id]).catch((error: unknown) => {
      if (!isMissingTable(error)) throw error;
    });
  }

  private async write(whole: boolean): Promise<void> {
    if (this.removed || this.absent) return;
    const { id, queues, concurrency, lease } = this.identity;
    const now = this.db.sql.now;
    const columns = `INSERT INTO ${this.table} (id, host, pid, queues, concurrency, lease_seconds, started_at, heartbeat_at) VALUES ($1, $2, $3, $4, $5, $6, ${now}, ${now})`;
    const changed = whole ? ["host", "pid", "queues", "concurrency", "lease_seconds", "started_at", "heartbeat_at"] : ["heartbeat_at"];
    const refresh =
      this.db.dialect === "mysql"
        ? `ON DUPLICATE KEY UPDATE ${changed.map((c) => `${c} = VALUES(${c})`).join(", ")}`
        : `ON CONFLICT (id) DO UPDATE SET ${changed.map((c) => `${c} = excluded.${c}`).join(", ")}`;
    try {
      await this.db.executor.query(`${columns} ${refresh}`, [id, hostname(), process.pid, JSON.stringify(queues), concurrency, lease]);
    } catch (error) {
      if (!isMissingTable(error)) throw error;
      this.absent = true;
    }
  }
}
