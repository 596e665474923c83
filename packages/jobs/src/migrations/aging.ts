import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/**
 * Migration 24: priority aging (`enqueue`'s `priorityAging` option, maintenance/age-priorities.ts).
 *
 * Three columns, null for a job without aging (the insert of such a job does not name them):
 * `aging_base`, the priority it was enqueued with; `aging_every`, the seconds per step;
 * `aging_max`, the highest priority aging gives it. The sweep raises the stored `priority`, so
 * the claim keeps reading its index in (priority DESC, id) order and computes nothing.
 *
 * `jobs_aging` holds the pending aging jobs only (a partial index on PostgreSQL and SQLite): the
 * sweep's statement reads an empty index where no job ages. MariaDB has no partial index; its
 * index on (status, aging_every) puts the pending jobs without aging under one ('pending', NULL)
 * prefix that the sweep's range (`status = 'pending' AND aging_every IS NOT NULL`) skips. History has the columns too (stored columns,
 * core/job-row.ts): a job retried from history keeps its aging.
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ table, named, index }) => [
    ...["aging_base", "aging_every", "aging_max"].flatMap((column) => [
      `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${column} int`,
      `ALTER TABLE ${named("jobs_history")} ADD COLUMN IF NOT EXISTS ${column} int`,
    ]),
    `CREATE INDEX IF NOT EXISTS ${index("jobs_aging")} ON ${table} (id) WHERE status = 'pending' AND aging_every IS NOT NULL`,
  ],
  sqlite: ({ table, named, index }) => [
    ...["aging_base", "aging_every", "aging_max"].flatMap((column) => [
      `ALTER TABLE ${table} ADD COLUMN ${column} INTEGER`,
      `ALTER TABLE ${named("jobs_history")} ADD COLUMN ${column} INTEGER`,
    ]),
    `CREATE INDEX IF NOT EXISTS ${index("jobs_aging")} ON ${table.slice(table.lastIndexOf(".") + 1)} (id) WHERE status = 'pending' AND aging_every IS NOT NULL`,
  ],
  mysql: ({ table, named }) => [
    ...["aging_base", "aging_every", "aging_max"].flatMap((column) => [
      `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${column} INT NULL`,
      `ALTER TABLE ${named("jobs_history")} ADD COLUMN IF NOT EXISTS ${column} INT NULL`,
    ]),
    `ALTER TABLE ${table} ADD INDEX IF NOT EXISTS jobs_aging (status, aging_every)`,
  ],
};

/** Migration 24 for `dialect`. */
export function priorityAging(dialect: DialectName): Migration {
  return { version: 24, name: "priority_aging", statements: statements[dialect] };
}
