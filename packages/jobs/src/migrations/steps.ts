import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/** The table of durable steps' saved results (`ctx.step`, `ctx.sleep`), one row per (job, step name). */
export const STEPS_TABLE = "jobs_steps";

/**
 * Migration 18: `jobs_steps`, what a job's durable steps saved (run/step-store.ts). A row is
 * written once, by the run that holds the job's claim token, and read by every later run of the
 * job. `result` is the step's JSON as text (not jsonb: a replayed step must hand back the very
 * text the first run saved, key order included); `wake_at` is a sleep's wake time.
 *
 * A job's steps go when its history row goes (retention): a trigger on the history table
 * deletes them, unless the job is back in the live table by then (retryJob moves it back, and a
 * re-run answers its steps from storage). PostgreSQL's dropped day partitions fire no trigger:
 * pruneHistory deletes their steps before the drop (maintenance/history.ts). No foreign key: a
 * job lives in one of two tables over its life.
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ table, named }) => {
    const steps = named(STEPS_TABLE);
    const fn = named("jobs_history_steps_gone");
    return [
      `CREATE TABLE IF NOT EXISTS ${steps} (
        job_id bigint NOT NULL,
        name text NOT NULL,
        kind text NOT NULL,
        result text,
        attempt integer NOT NULL,
        duration_ms integer,
        wake_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (job_id, name)
      )`,
      // Per statement: a prune batch deletes its jobs' steps in one join, not a probe per row.
      `CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          DELETE FROM ${steps} AS s USING old_rows AS o
          WHERE s.job_id = o.id AND NOT EXISTS (SELECT 1 FROM ${table} AS j WHERE j.id = o.id);
          RETURN NULL;
        END $$`,
      `CREATE OR REPLACE TRIGGER jobs_steps_gone AFTER DELETE ON ${named("jobs_history")} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
    ];
  },
  sqlite: ({ named, index }) => {
    const steps = named(STEPS_TABLE);
    const history = named("jobs_history");
    // A trigger's body names tables without their schema (they are the trigger's own schema's).
    return [
      `CREATE TABLE IF NOT EXISTS ${steps} (
        job_id INTEGER NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        result TEXT,
        attempt INTEGER NOT NULL,
        duration_ms INTEGER,
        wake_at INTEGER,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (job_id, name)
      ) WITHOUT ROWID`,
      `CREATE TRIGGER IF NOT EXISTS ${index("jobs_steps_gone")} AFTER DELETE ON ${history.slice(history.lastIndexOf(".") + 1)} FOR EACH ROW
        BEGIN DELETE FROM "${STEPS_TABLE}" WHERE job_id = OLD.id AND NOT EXISTS (SELECT 1 FROM "jobs" WHERE id = OLD.id); END`,
    ];
  },
  mysql: ({ table, named }) => {
    const steps = named(STEPS_TABLE);
    return [
      `CREATE TABLE IF NOT EXISTS ${steps} (
        job_id BIGINT NOT NULL,
        name VARCHAR(255) NOT NULL,
        kind VARCHAR(16) NOT NULL,
        result LONGTEXT,
        attempt INT NOT NULL,
        duration_ms INT,
        wake_at DATETIME(6),
        created_at DATETIME(6) NOT NULL,
        PRIMARY KEY (job_id, name)
      ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
      `CREATE TRIGGER IF NOT EXISTS ${named("jobs_steps_gone")} AFTER DELETE ON ${named("jobs_history")} FOR EACH ROW
        DELETE FROM ${steps} WHERE job_id = OLD.id AND NOT EXISTS (SELECT 1 FROM ${table} WHERE id = OLD.id)`,
    ];
  },
};

/** Migration 18 for `dialect`. */
export function durableSteps(dialect: DialectName): Migration {
  return { version: 18, name: "durable_steps", statements: statements[dialect] };
}
