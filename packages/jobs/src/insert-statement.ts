import type { JobsDatabase } from "./db/database.js";
import { refuseWarnings } from "./dialects/mysql.js";
import { pgInsert } from "./insert-postgres.js";
import { INSERT_COLUMNS, type InsertedRow, type NewJob } from "./new-job.js";
import { valuesList, type PerDialect, type Script } from "./sql.js";

/** Parameters per row, in NewJob's order (INSERT_COLUMNS). */
const ROW_PARAMS = 13;
const row = (db: JobsDatabase) => (p: (n: number) => string) =>
  `(${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${db.sql.nowPlus(p(6))}, ${p(7)}, ${p(8)}, ${p(9)}, ${p(10)}, ${p(11)}, ${p(12)}, ${p(13)})`;

// PostgreSQL's is pgInsert. ON CONFLICT DO NOTHING without a target covers both key indexes.
const INSERT: Omit<PerDialect<(db: JobsDatabase, rows: number) => string | Script<InsertedRow>>, "postgres"> = {
  // Multi-row VALUES: rows are inserted, and numbered, in input order. ON CONFLICT DO NOTHING
  // without a target covers both key indexes (the dedup one is partial, as on PostgreSQL).
  sqlite: (db, rows) => `
    INSERT INTO ${db.table} (${INSERT_COLUMNS})
    VALUES ${valuesList(rows, ROW_PARAMS, row(db))}
    ON CONFLICT DO NOTHING
    RETURNING id, idempotency_key, dedup_key`,
  // INSERT IGNORE … RETURNING returns the inserted rows only, like ON CONFLICT DO NOTHING
  // (ON DUPLICATE KEY UPDATE would return the existing rows too, hiding whose they are). IGNORE
  // would also turn bad data into warnings, so any warning besides the duplicates fails the
  // insert, inside a transaction that then rolls back.
  mysql: (db, rows) => (executor, params) =>
    executor.transaction(async (tx) => {
      const inserted = await tx.query<InsertedRow>(
        `INSERT IGNORE INTO ${db.table} (${INSERT_COLUMNS})
         VALUES ${valuesList(rows, ROW_PARAMS, row(db))}
         RETURNING id, idempotency_key, dedup_key`,
        params,
      );
      await refuseWarnings(tx, rows - inserted.rows.length);
      return inserted;
    }),
};

/** The statement that inserts `jobs`, and whether it is keyless (ids only, no conflicts to resolve). */
export function insertStatement(db: JobsDatabase, jobs: NewJob[]): { sql: string | Script<InsertedRow>; params: unknown[]; keyless?: boolean } {
  if (db.dialect === "postgres") return pgInsert(db, jobs);
  // SQLite, MariaDB: one row after the other, as valuesList numbers them.
  return {
    sql: INSERT[db.dialect](db, jobs.length),
    params: jobs.flatMap((j) => [
      j.queue,
      j.task,
      j.payload,
      j.priority,
      j.maxAttempts,
      j.delay,
      j.tenant,
      j.idempotencyKey,
      j.dedupKey,
      j.trace,
      j.group,
      j.concurrencyKey,
      j.maxSnoozes,
    ]),
  };
}
