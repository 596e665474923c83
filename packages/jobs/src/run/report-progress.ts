import type { JobsDatabase } from "../core/database.js";
import { toJsonText } from "../base/payload.js";
import { JobError } from "../base/errors.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import { qualified } from "../db/identifiers.js";
import { PROGRESS_TABLE } from "../migrations/progress.js";

/** At most one progress write per job per this many milliseconds; the latest value waits for the next. */
export const PROGRESS_WRITE_INTERVAL_MS = 500;

/** The quoted, qualified jobs_progress table of `db`. */
export function progressTable(db: JobsDatabase): string {
  return qualified(db.dialect, db.schema, PROGRESS_TABLE);
}

/** A job's live progress (what `ctx.reportProgress` last wrote), or null. */
export async function readLiveProgress(db: JobsDatabase, jobId: number): Promise<unknown> {
  const { rows } = await db.executor.query<{ value: unknown }>(`SELECT value FROM ${progressTable(db)} WHERE job_id = $1`, [jobId]);
  return rows[0] === undefined ? null : db.sql.readJson(rows[0].value);
}

/**
 * Stores a running job's live progress in `jobs_progress` (migration 23), not in its row: the
 * live row is what claims and completions rewrite, and a progress bar ticking on it would make
 * every tick a new row version of the hottest table. Fenced: the row is written only while
 * `$2` is still the job's claim token, so a taken-over run's report lands nowhere.
 */
const WRITE: PerDialect<(db: JobsDatabase, progress: string) => string> = {
  postgres: (db, progress) => `
    INSERT INTO ${progress} (job_id, value, updated_at)
    SELECT id, $3::jsonb, ${db.sql.now} FROM ${db.table} WHERE id = $1 AND claim_token = $2 AND status = 'running'
    ON CONFLICT (job_id) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
  // WHERE before ON CONFLICT: without it SQLite would read ON as a join's.
  sqlite: (db, progress) => `
    INSERT INTO ${progress} (job_id, value, updated_at)
    SELECT id, $3, ${db.sql.now} FROM ${db.table} WHERE id = $1 AND claim_token = $2 AND status = 'running'
    ON CONFLICT (job_id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
  // updated_at changes on every write (microseconds), so a kept row always counts as affected.
  mysql: (db, progress) => `
    INSERT INTO ${progress} (job_id, value, updated_at)
    SELECT id, $3, ${db.sql.now} FROM ${db.table} WHERE id = $1 AND claim_token = $2 AND status = 'running'
    ON DUPLICATE KEY UPDATE value = VALUES(value), updated_at = VALUES(updated_at)`,
};

/**
 * One run's `ctx.reportProgress`: writes at once when the last write is older than the
 * interval, else keeps the latest value and writes it when the interval is over; `flush()`
 * (before the run's verdict is written) writes what is kept, so the last value always lands.
 * Resolves false once a write found the job taken over: later reports write nothing.
 */
export class ProgressReporter {
  private lastWriteAt = 0;
  private kept: { json: string } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<boolean> = Promise.resolve(true);
  private owned = true;

  constructor(
    private readonly db: JobsDatabase,
    private readonly job: { id: number; token: string },
    private readonly fenced: () => void,
    private readonly intervalMs = PROGRESS_WRITE_INTERVAL_MS,
  ) {}

  async report(value: unknown): Promise<boolean> {
    if (value === undefined) throw new JobError("reportProgress: progress must be a JSON value, got undefined", "progress");
    const json = value === null ? "null" : (toJsonText(value, "progress") as string);
    if (!this.owned) return false;
    this.kept = { json };
    const wait = this.lastWriteAt + this.intervalMs - Date.now();
    if (wait <= 0 && this.timer === null) return this.writeKept();
    this.timer ??= setTimeout(() => void this.writeKept(), Math.max(0, wait));
    return true;
  }

  /** Writes the kept value, if any; resolves false when the job was taken over. */
  async flush(): Promise<boolean> {
    if (this.kept !== null) return this.writeKept();
    return this.writing;
  }

  private writeKept(): Promise<boolean> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    // Counted from when the write is asked for: reports right behind it wait for the interval.
    this.lastWriteAt = Date.now();
    // One write at a time, in report order: a slow write is never overtaken by an older value.
    this.writing = this.writing.then(async (owned) => {
      const kept = this.kept;
      if (!owned || kept === null) return owned;
      const sql = forDialect(WRITE, this.db.dialect, "report progress")(this.db, progressTable(this.db));
      let rowCount: number;
      try {
        ({ rowCount } = await this.db.executor.query(sql, [this.job.id, this.job.token, kept.json]));
      } catch {
        // Progress is for eyes only: a failed write (a lost connection) fails nothing, and the
        // value stays kept for the next report or the flush. Never a rejection a handler's
        // `void ctx.reportProgress(…)` would leave unhandled.
        return true;
      }
      // A newer value reported during the write stays kept.
      if (this.kept === kept) this.kept = null;
      if (rowCount > 0) return true;
      this.owned = false;
      this.fenced();
      return false;
    });
    return this.writing;
  }
}
