import { dialectFor } from "../dialects/index.js";

const SQLITE_NOW = dialectFor("sqlite").now;
import { MINUTE_HORIZON, MINUTE_SLOTS, type Migration, type SchemaNames } from "./types.js";

/** The row triggers that keep jobs_counts (migration 7), as migration 11 replaces them. */
export const COUNT_TRIGGERS = ["jobs_count_insert", "jobs_count_delete", "jobs_count_update_old", "jobs_count_update_new"] as const;

/** jobs_counts (migration 7), `finished` its CHECK of the status. */
export function countsTable(name: string, finished: string): string {
  return `CREATE TABLE IF NOT EXISTS ${name} (
          queue TEXT NOT NULL,
          tenant TEXT NOT NULL DEFAULT '',
          status TEXT NOT NULL CHECK (${finished}),
          shard INTEGER NOT NULL,
          n INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (queue, tenant, status, shard)
        )`;
}

/**
 * Migration 7's row triggers keeping jobs_counts: +1 for a row that becomes (or is inserted)
 * finished, -1 for one that stops being finished (or is deleted). `finished(row)` is the test
 * of a row being finished, spelled by the migration that creates them.
 * SQLite names the trigger's table, and those in its body, without a schema (the trigger's).
 */
export function countTriggers({ table, named, index }: SchemaNames, finished: (row: "OLD" | "NEW") => string): string[] {
  const on = table.slice(table.lastIndexOf(".") + 1);
  const counts = named("jobs_counts");
  const inBody = counts.slice(counts.lastIndexOf(".") + 1);
  const bump = (row: "OLD" | "NEW", delta: 1 | -1) =>
    `INSERT INTO ${inBody} (queue, tenant, status, shard, n) VALUES (${row}.queue, COALESCE(${row}.tenant, ''), ${row}.status, 0, ${delta})
           ON CONFLICT (queue, tenant, status, shard) DO UPDATE SET n = n + ${delta};`;
  const moved = "(OLD.status IS NOT NEW.status OR OLD.queue IS NOT NEW.queue OR OLD.tenant IS NOT NEW.tenant)";
  return rowCountTriggers({ index, on, prefix: "jobs_count", columns: "status, queue, tenant", counts: finished, moved, bump });
}

/**
 * The four row triggers that keep a count table (`prefix`_insert, _delete, _update_old,
 * _update_new): `bump(row, +1)` for a row inserted or updated into what `counts(row)` holds,
 * `bump(row, -1)` for one deleted or updated out of it. An update of `columns` that `moved`
 * the row takes two triggers: SQLite's trigger bodies have no IF.
 */
export function rowCountTriggers(t: {
  index: SchemaNames["index"];
  on: string;
  prefix: string;
  columns: string;
  counts: (row: "OLD" | "NEW") => string;
  moved: string;
  bump: (row: "OLD" | "NEW", delta: 1 | -1) => string;
}): string[] {
  const { index, on, prefix, columns, counts, moved, bump } = t;
  return [
    `CREATE TRIGGER IF NOT EXISTS ${index(`${prefix}_insert`)} AFTER INSERT ON ${on} FOR EACH ROW WHEN ${counts("NEW")}
          BEGIN ${bump("NEW", 1)} END`,
    `CREATE TRIGGER IF NOT EXISTS ${index(`${prefix}_delete`)} AFTER DELETE ON ${on} FOR EACH ROW WHEN ${counts("OLD")}
          BEGIN ${bump("OLD", -1)} END`,
    `CREATE TRIGGER IF NOT EXISTS ${index(`${prefix}_update_old`)} AFTER UPDATE OF ${columns} ON ${on} FOR EACH ROW
          WHEN ${counts("OLD")} AND ${moved}
          BEGIN ${bump("OLD", -1)} END`,
    `CREATE TRIGGER IF NOT EXISTS ${index(`${prefix}_update_new`)} AFTER UPDATE OF ${columns} ON ${on} FOR EACH ROW
          WHEN ${counts("NEW")} AND ${moved}
          BEGIN ${bump("NEW", 1)} END`,
  ];
}

/**
 * Migration 11: migration 7's triggers and jobs_counts' CHECK with the status test spelled as
 * comparisons, not `status IN ('done', 'failed', 'cancelled')`. A trigger runs as a subprogram
 * with fresh state on every row, and SQLite evaluates an IN list of three or more values there
 * (and in a CHECK) by filling a temporary B-tree with it: every row that a claim, a start or a
 * completion changed built one in each update trigger, finished or not, and each count the
 * completion's trigger added built one more for the CHECK (two or fewer values are compared one
 * by one). SQLite cannot change a CHECK in place: the table is rebuilt (a few rows per queue),
 * its triggers dropped first (a rename checks the triggers that name the table).
 */
export function countsWithoutInLists(names: SchemaNames): string[] {
  const counts = names.named("jobs_counts");
  const rebuilt = names.named("jobs_counts_v11");
  const finished = (row: string) => `${row}status = 'done' OR ${row}status = 'failed' OR ${row}status = 'cancelled'`;
  return [
    ...COUNT_TRIGGERS.map((name) => `DROP TRIGGER IF EXISTS ${names.index(name)}`),
    countsTable(rebuilt, finished("")),
    `INSERT INTO ${rebuilt} (queue, tenant, status, shard, n) SELECT queue, tenant, status, shard, n FROM ${counts}`,
    `DROP TABLE ${counts}`,
    `ALTER TABLE ${rebuilt} RENAME TO ${counts.slice(counts.lastIndexOf(".") + 1)}`,
    ...countTriggers(names, (row) => `(${finished(`${row}.`)})`),
  ];
}

/** Migration 7: finished jobs per queue, tenant and status (jobs_counts), kept by row triggers. */
export const finishedCounts: Migration = {
  version: 7,
  name: "finished_counts",
  // See migrations/postgres-counts.ts, version 7. One writer at a time: one shard (0) is enough.
  statements: (names) => {
    const { table, named, index } = names;
    const on = table.slice(table.lastIndexOf(".") + 1);
    const counts = named("jobs_counts");
    const finished = "('done', 'failed', 'cancelled')";
    return [
      // The waiting count of statusCounts reads the waiting jobs only (dependencies, migration 6).
      `CREATE INDEX IF NOT EXISTS ${index("jobs_waiting")} ON ${on} (queue) WHERE status = 'waiting'`,
      countsTable(counts, `status IN ${finished}`),
      ...countTriggers(names, (row) => `${row}.status IN ${finished}`),
      `INSERT INTO ${counts} (queue, tenant, status, shard, n)
          SELECT queue, COALESCE(tenant, ''), status, 0, count(*) FROM ${table} WHERE status IN ${finished} GROUP BY queue, COALESCE(tenant, ''), status
          ON CONFLICT (queue, tenant, status, shard) DO NOTHING`,
    ];
  },
};

/** The row triggers that keep jobs_minutes (migration 10), as it creates them. */
export const MINUTE_TRIGGERS = ["jobs_minute_insert", "jobs_minute_delete", "jobs_minute_update_old", "jobs_minute_update_new"] as const;

/** Whether `row` ended done or failed within the horizon: what jobs_minutes counts. */
function minuteCounted(row: "OLD" | "NEW"): string {
  return `${row}.status IN ('done', 'failed') AND ${row}.finished_at >= ${SQLITE_NOW} - ${MINUTE_HORIZON * 60_000}`;
}

/** Adds the (slot, queue, status, shard, minute, n) rows of `values` to jobs_minutes `minutes` (unqualified in a trigger's body), in the ring's way. */
function minutesUpsert(minutes: string, values: string): string {
  return `INSERT INTO ${minutes} (slot, queue, status, shard, minute, n) ${values}
           ON CONFLICT (slot, queue, status, shard) DO UPDATE
           SET n = CASE WHEN minute = excluded.minute THEN n + excluded.n WHEN minute < excluded.minute THEN excluded.n ELSE n END,
               minute = max(minute, excluded.minute)`;
}

/** Migration 10's row triggers keeping jobs_minutes from the changes of `names.table`. */
export function minuteTriggers({ table, named, index }: SchemaNames): string[] {
  const on = table.slice(table.lastIndexOf(".") + 1);
  const minutes = named("jobs_minutes");
  const inBody = minutes.slice(minutes.lastIndexOf(".") + 1);
  const bump = (row: "OLD" | "NEW", delta: 1 | -1) =>
    `${minutesUpsert(inBody, `VALUES ((${row}.finished_at / 60000) % ${MINUTE_SLOTS}, ${row}.queue, ${row}.status, 0, ${row}.finished_at / 60000, ${delta})`)};`;
  const moved = "(OLD.status IS NOT NEW.status OR OLD.queue IS NOT NEW.queue OR OLD.finished_at IS NOT NEW.finished_at)";
  return rowCountTriggers({ index, on, prefix: "jobs_minute", columns: "status, queue, finished_at", counts: minuteCounted, moved, bump });
}

/**
 * The statement that adds to jobs_minutes `minutes` the rows of `relation` (a table or an
 * aliased subquery of queue, status, finished_at) that ended within the horizon, times `delta`.
 */
export function minutesFrom(minutes: string, relation: string, delta: 1 | -1): string {
  return minutesUpsert(
    minutes,
    `SELECT (finished_at / 60000) % ${MINUTE_SLOTS}, queue, status, 0, finished_at / 60000, ${delta} * count(*) FROM ${relation}
           WHERE ${minuteCounted("NEW").replace(/NEW\./g, "")} GROUP BY finished_at / 60000, queue, status`,
  );
}

/**
 * The statement that adds to jobs_counts `counts` the finished rows of `relation` (a table or
 * an aliased subquery of queue, tenant, status), times `delta`.
 */
export function countsFrom(counts: string, relation: string, delta: 1 | -1): string {
  return `INSERT INTO ${counts} (queue, tenant, status, shard, n)
          SELECT queue, COALESCE(tenant, ''), status, 0, ${delta} * count(*) FROM ${relation}
          WHERE status = 'done' OR status = 'failed' OR status = 'cancelled' GROUP BY queue, COALESCE(tenant, ''), status
          ON CONFLICT (queue, tenant, status, shard) DO UPDATE SET n = n + excluded.n`;
}

/** Migration 10: jobs ended per queue and minute (jobs_minutes), kept by row triggers. */
export const finishedMinutes: Migration = {
  version: 10,
  name: "finished_minutes",
  // See migrations/postgres-counts.ts, version 10: row triggers here, one shard (0), minutes of the
  // epoch-millisecond finished_at.
  statements: (names) => {
    const minutes = names.named("jobs_minutes");
    return [
      `CREATE TABLE IF NOT EXISTS ${minutes} (
          slot INTEGER NOT NULL,
          queue TEXT NOT NULL,
          status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
          shard INTEGER NOT NULL,
          minute INTEGER NOT NULL,
          n INTEGER NOT NULL,
          PRIMARY KEY (slot, queue, status, shard)
        )`,
      ...minuteTriggers(names),
      `DELETE FROM ${minutes}`,
      minutesFrom(minutes, names.table, 1),
    ];
  },
};
