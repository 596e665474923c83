import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/** The table of live progress (`ctx.reportProgress`), one row per job that reported any. */
export const PROGRESS_TABLE = "jobs_progress";

/** The NOTIFY channel of ended awaited jobs: the queue's channel (core/database.ts) and `.ended`. */
export function endedChannelOf(schema: string | null): string {
  return `${schema === null ? "forge_jobs" : `forge_jobs.${schema}`}.ended`;
}

/** A quoted PostgreSQL identifier back to its name. */
const unquoted = (quoted: string): string => quoted.slice(1, -1).replace(/""/g, '"');

/**
 * Migration 23: awaited jobs and live progress.
 *
 * `awaited` is set by waitForJob on PostgreSQL only (reads/wait-for-job.ts), and copied into
 * history with the row (a stored column, core/job-row.ts). The trigger's WHEN is checked by the
 * server on each row an ending write inserts into history, before any function is called: a
 * job nobody awaits ends as before, with no call and no NOTIFY; the live table has no trigger.
 * SQLite and MariaDB get the column for the schemas' parity; their waiters are woken inside the
 * process and poll (run/end-wakeups.ts).
 *
 * `jobs_progress` holds what `ctx.reportProgress` wrote, outside the live row (which every
 * claim and completion rewrites). A job's row goes when its history row goes, as its steps do
 * (migrations/steps.ts).
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ table, schema, named }) => {
    const progress = named(PROGRESS_TABLE);
    const history = named("jobs_history");
    const notify = named("jobs_awaited_ended");
    const gone = named("jobs_history_progress_gone");
    const channel = endedChannelOf(schema === null ? null : unquoted(schema)).replace(/'/g, "''");
    return [
      `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS awaited boolean NOT NULL DEFAULT false`,
      `ALTER TABLE ${history} ADD COLUMN IF NOT EXISTS awaited boolean NOT NULL DEFAULT false`,
      `CREATE OR REPLACE FUNCTION ${notify}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_notify('${channel}', NEW.id::text);
          RETURN NULL;
        END $$`,
      `CREATE OR REPLACE TRIGGER jobs_awaited_ended AFTER INSERT ON ${history} FOR EACH ROW WHEN (NEW.awaited) EXECUTE FUNCTION ${notify}()`,
      `CREATE TABLE IF NOT EXISTS ${progress} (
        job_id bigint PRIMARY KEY,
        value jsonb NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE OR REPLACE FUNCTION ${gone}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          DELETE FROM ${progress} AS p USING old_rows AS o
          WHERE p.job_id = o.id AND NOT EXISTS (SELECT 1 FROM ${table} AS j WHERE j.id = o.id);
          RETURN NULL;
        END $$`,
      `CREATE OR REPLACE TRIGGER jobs_progress_gone AFTER DELETE ON ${history} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ${gone}()`,
    ];
  },
  sqlite: ({ table, named, index }) => {
    const history = named("jobs_history");
    return [
      `ALTER TABLE ${table} ADD COLUMN awaited INTEGER NOT NULL DEFAULT 0`,
      `ALTER TABLE ${history} ADD COLUMN awaited INTEGER NOT NULL DEFAULT 0`,
      `CREATE TABLE IF NOT EXISTS ${named(PROGRESS_TABLE)} (
        job_id INTEGER PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL
      )`,
      // A trigger's body names tables without their schema (they are the trigger's own schema's).
      `CREATE TRIGGER IF NOT EXISTS ${index("jobs_progress_gone")} AFTER DELETE ON ${history.slice(history.lastIndexOf(".") + 1)} FOR EACH ROW
        BEGIN DELETE FROM "${PROGRESS_TABLE}" WHERE job_id = OLD.id AND NOT EXISTS (SELECT 1 FROM "jobs" WHERE id = OLD.id); END`,
    ];
  },
  mysql: ({ table, named }) => {
    const progress = named(PROGRESS_TABLE);
    return [
      `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS awaited BOOLEAN NOT NULL DEFAULT 0`,
      `ALTER TABLE ${named("jobs_history")} ADD COLUMN IF NOT EXISTS awaited BOOLEAN NOT NULL DEFAULT 0`,
      `CREATE TABLE IF NOT EXISTS ${progress} (
        job_id BIGINT NOT NULL PRIMARY KEY,
        value LONGTEXT NOT NULL,
        updated_at DATETIME(6) NOT NULL
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
      `CREATE TRIGGER IF NOT EXISTS ${named("jobs_progress_gone")} AFTER DELETE ON ${named("jobs_history")} FOR EACH ROW
        DELETE FROM ${progress} WHERE job_id = OLD.id AND NOT EXISTS (SELECT 1 FROM ${table} WHERE id = OLD.id)`,
    ];
  },
};

/** Migration 23 for `dialect`. */
export function awaitedAndProgress(dialect: DialectName): Migration {
  return { version: 23, name: "awaited_and_progress", statements: statements[dialect] };
}
