import type { JobsDatabase } from "../core/database.js";
import { pgInsert } from "./insert-postgres.js";
import { EXTRA_COLUMNS, extraColumns, hasKey, insertColumns, type ExtraColumns, type InsertedRow, type NewJob } from "./new-job.js";
import { isUniqueViolation } from "../core/sql-errors.js";
import { valuesList, type PerDialect, type Script } from "../core/sql.js";

/**
 * Parameters per row, in NewJob's order (INSERT_COLUMNS), then one per extra column (three for
 * `aging`). Each is used once: the drivers send `$n` as `?`, one variable per use, and SQLite
 * refuses a statement of more than 32,766 (a chunk of 1,800 rows, 18 parameters each with
 * every extra column).
 */
const BASE_PARAMS = 13;
const widthOf = (extras: readonly ExtraColumns[]) => extras.reduce((n, e) => n + EXTRA_COLUMNS[e].columns.length, BASE_PARAMS);
const row = (db: JobsDatabase, width: number) => (p: (n: number) => string) =>
  `(${Array.from({ length: width }, (_, i) => (i === 5 ? db.sql.nowPlus(p(6)) : p(i + 1))).join(", ")})`;

// PostgreSQL's is pgInsert. ON CONFLICT DO NOTHING without a target covers both key indexes.
// `mayConflict`: several rows, one of them with a key (a row that may lose to another's key while
// the others go in).
type Shape = { rows: number; mayConflict: boolean; extras: readonly ExtraColumns[] };
const columnsOf = (shape: Shape) => insertColumns(shape.extras);
const valuesOf = (db: JobsDatabase, { rows, extras }: Shape) => valuesList(rows, widthOf(extras), row(db, widthOf(extras)));

const INSERT: Omit<PerDialect<(db: JobsDatabase, shape: Shape) => string | Script<InsertedRow>>, "postgres"> = {
  // Multi-row VALUES: rows are inserted, and numbered, in input order. ON CONFLICT DO NOTHING
  // without a target covers both key indexes (the dedup one is partial, as on PostgreSQL).
  sqlite: (db, shape) => `
    INSERT INTO ${db.table} (${columnsOf(shape)})
    VALUES ${valuesOf(db, shape)}
    ON CONFLICT DO NOTHING
    RETURNING id, idempotency_key, dedup_key`,
  // Several rows that may hit a key: INSERT IGNORE … RETURNING returns the inserted rows only,
  // like ON CONFLICT DO NOTHING (ON DUPLICATE KEY UPDATE would return the existing rows too,
  // hiding whose they are). IGNORE would also turn bad data into warnings, so any warning
  // besides the duplicates fails the insert, inside a transaction that then rolls back.
  // One row, or rows without keys: mysqlPlainInsert, one statement and one round trip.
  mysql: (db, shape) =>
    !shape.mayConflict
      ? mysqlPlainInsert(db, shape)
      : (executor, params) =>
          executor.transaction(async (tx) => {
            const inserted = await tx.query<InsertedRow>(
              `INSERT IGNORE INTO ${db.table} (${columnsOf(shape)})
         VALUES ${valuesOf(db, shape)}
         RETURNING id, idempotency_key, dedup_key`,
              params,
            );
            await db.sql.mariadb!.refuseWarnings(tx, shape.rows - inserted.rows.length);
            return inserted;
          }),
};

/**
 * MariaDB, one job or jobs without keys: a plain INSERT in strict mode (bad data is an error,
 * not a warning), alone in autocommit or in the caller's transaction — one round trip, where
 * the INSERT IGNORE above takes four (START TRANSACTION, the insert, @@warning_count, COMMIT).
 * A statement that fails changes nothing. The only duplicate it can meet is one job's own key:
 * ER_DUP_ENTRY then means that job lost to an existing row, as INSERT IGNORE's skipped row does.
 */
function mysqlPlainInsert(db: JobsDatabase, shape: Shape): Script<InsertedRow> {
  const { rows } = shape;
  const sql = `SET STATEMENT sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES') FOR
    INSERT INTO ${db.table} (${columnsOf(shape)})
    VALUES ${valuesOf(db, shape)}
    RETURNING id, idempotency_key, dedup_key`;
  return (executor, params) =>
    executor.query<InsertedRow>(sql, params).catch((error: unknown) => {
      if (rows === 1 && isUniqueViolation(error, "mysql")) return { rows: [], rowCount: 0 };
      throw error;
    });
}

/**
 * The statements built so far, by what their text depends on (dialect, table, rows, may
 * conflict): one enqueue after another reuses the same text (and the same string, whose hash
 * the statement caches keep), instead of building a kilobyte of SQL per job — also through
 * `bind(tx)`, which makes a new JobsDatabase per transaction. Bulk chunks come in a handful
 * of sizes.
 */
const built = new Map<string, string | Script<InsertedRow>>();
const BUILT_SHAPES = 64;

function statementFor(db: JobsDatabase, dialect: "sqlite" | "mysql", shape: Shape): string | Script<InsertedRow> {
  const key = `${dialect}:${db.table}:${shape.rows}:${shape.mayConflict}:${shape.extras.join("+")}`;
  let sql = built.get(key);
  if (sql === undefined) {
    sql = INSERT[dialect](db, shape);
    if (built.size >= BUILT_SHAPES) built.clear();
    built.set(key, sql);
  }
  return sql;
}

/** The statement that inserts `jobs`, and whether it is keyless (ids only, no conflicts to resolve). */
export function insertStatement(db: JobsDatabase, jobs: NewJob[]): { sql: string | Script<InsertedRow>; params: unknown[]; keyless?: boolean } {
  if (db.dialect === "postgres") return pgInsert(db, jobs);
  // SQLite, MariaDB: one row after the other, as valuesList numbers them.
  const extras = extraColumns(jobs);
  return {
    sql: statementFor(db, db.dialect, { rows: jobs.length, mayConflict: jobs.length > 1 && jobs.some(hasKey), extras }),
    params: rowParams(db, jobs, extras),
  };
}

/**
 * The parameters of `jobs`, row after row: pushed into one array (a bulk enqueue's 20,000 rows
 * through flatMap built an array per row and copied it again).
 */
function rowParams(db: JobsDatabase, jobs: readonly NewJob[], extras: readonly ExtraColumns[]): unknown[] {
  const params: unknown[] = [];
  for (const j of jobs) {
    params.push(
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
    );
    for (const e of extras) {
      for (const column of EXTRA_COLUMNS[e].columns) {
        const value = column.value(j);
        params.push(typeof value === "boolean" ? db.sql.boolean(value) : value);
      }
    }
  }
  return params;
}
