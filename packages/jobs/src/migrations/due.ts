import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";
import { dialectFor } from "../dialects/index.js";

/**
 * Migration 19: the `due` flag, which keeps jobs that cannot run yet out of the claim index.
 *
 * A plain pending job whose run_at is in the future (a delayed enqueue, a retry's backoff, a
 * snooze, a durable sleep) used to sit in the claim index among the ready ones, and every claim
 * walked past all of them: the claim's cost grew with the jobs due tomorrow. `due` is false only
 * for such a job (plain, pending, run_at in the future), written by the statement that sets the
 * future run_at; the claim index holds the due ones only, and the scheduled index the rest, by
 * run_at. A claim first promotes the scheduled jobs whose time has come (run/due.ts). Jobs with a
 * group or a concurrency key stay due: the fair claim reads them by group, and their index
 * (jobs_flow_claim) is not keyed by due. The API's status stays `pending` for both.
 *
 * `due` is a hint the claim can trust in one direction only: a due job whose run_at is in the
 * future is still not claimed (every claim tests run_at), so a write that forgets to clear it
 * costs time, never order or safety; a job left not due past its time is promoted. History has
 * the column too (a move copies the stored columns by one list), though nothing there reads it.
 */
const PLAIN = "group_key = '' AND concurrency_key = ''";

const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  // ADD COLUMN with a constant default is a catalog change (no table rewrite) since PostgreSQL 11.
  postgres: ({ table, index, schema, named }) => [
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS due boolean NOT NULL DEFAULT true`,
    `ALTER TABLE ${named("jobs_history")} ADD COLUMN IF NOT EXISTS due boolean NOT NULL DEFAULT true`,
    `UPDATE ${table} SET due = false WHERE status = 'pending' AND ${PLAIN} AND run_at > now()`,
    `DROP INDEX IF EXISTS ${schema ? `${schema}.` : ""}${index("jobs_claim_plain")}`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_claim_plain")} ON ${table} (queue, priority DESC, id) WHERE status = 'pending' AND ${PLAIN} AND due`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_scheduled")} ON ${table} (run_at) WHERE status = 'pending' AND ${PLAIN} AND NOT due`,
  ],
  // SQLite's CREATE INDEX names the table unqualified (the index's own name carries the schema).
  sqlite: ({ table, index, named }) => {
    const on = table.slice(table.lastIndexOf(".") + 1);
    return [
      `ALTER TABLE ${table} ADD COLUMN due INTEGER NOT NULL DEFAULT 1`,
      `ALTER TABLE ${named("jobs_history")} ADD COLUMN due INTEGER NOT NULL DEFAULT 1`,
      `UPDATE ${table} SET due = 0 WHERE status = 'pending' AND ${PLAIN} AND run_at > ${dialectFor("sqlite").now}`,
      `DROP INDEX IF EXISTS ${index("jobs_claim_plain")}`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_claim_plain")} ON ${on} (queue, priority DESC, id) WHERE status = 'pending' AND ${PLAIN} AND due`,
      `CREATE INDEX IF NOT EXISTS ${index("jobs_scheduled")} ON ${on} (run_at) WHERE status = 'pending' AND ${PLAIN} AND NOT due`,
    ];
  },
  // No partial indexes: due joins the claim index's key after the group (flow jobs are always
  // due, so a group's walk reads due = 1 as before), and the scheduled index leads with
  // (status, due) so that it holds the scheduled jobs apart from the rest.
  mysql: ({ table, named }) => [
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS due TINYINT(1) NOT NULL DEFAULT 1`,
    `ALTER TABLE ${named("jobs_history")} ADD COLUMN IF NOT EXISTS due TINYINT(1) NOT NULL DEFAULT 1`,
    `UPDATE ${table} SET due = 0 WHERE status = 'pending' AND ${PLAIN} AND run_at > UTC_TIMESTAMP(6)`,
    `ALTER TABLE ${table} DROP INDEX IF EXISTS jobs_flow_claim,
      ADD INDEX jobs_flow_claim (status, queue, group_key, due, neg_priority, id),
      ADD INDEX IF NOT EXISTS jobs_scheduled (status, due, run_at)`,
  ],
};

/** Migration 19 for `dialect`. */
export function dueFlag(dialect: DialectName): Migration {
  return { version: 19, name: "due_flag", statements: statements[dialect] };
}
