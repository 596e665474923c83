import { TABLE_NAME, type JobsDatabase } from "../core/database.js";
import { qualified } from "../db/identifiers.js";
import { forDialect, type PerDialect } from "../core/sql.js";

/**
 * A job's id is unique across the live table and history only while the live table's id
 * counter stays above every id history holds. A TRUNCATE of the live table alone restarts the
 * counter on MariaDB (InnoDB's TRUNCATE always does) and on PostgreSQL with RESTART IDENTITY;
 * SQLite's AUTOINCREMENT counter survives a DELETE of every row, and only a hand edit of
 * sqlite_sequence restarts it. After a restart, the next jobs take ids that ended jobs hold:
 * on MariaDB and SQLite the write that ends such a job cannot copy it into history (its
 * primary key), and retried as an outage it would stay running for good; PostgreSQL's history
 * has no unique id and takes the duplicate silently (`forge-jobs doctor` reports it).
 */

/** Each backend's id counter: how to read where it is, raise it, and drop the history rows live jobs took the ids of. */
interface IdCounter {
  /** The id the next insert takes, given the live table's highest (`live`). */
  next(db: JobsDatabase, live: number): Promise<number>;
  /** Sets the counter so that the next id is above `highest`. */
  raise(db: JobsDatabase, highest: number): Promise<void>;
  /** Deletes history's rows whose id a live job holds; null where history has no unique id (nothing refuses the move). */
  dropTaken: ((db: JobsDatabase) => Promise<number>) | null;
}

const one = async (db: JobsDatabase, sql: string, params: unknown[] = []) =>
  Number((await db.executor.query<{ n: number | string | null }>(sql, params)).rows[0]?.n ?? 0);

const COUNTER: PerDialect<IdCounter> = {
  postgres: {
    next: async (db, live) => {
      const sequence = await db.executor.query<{ s: string | null }>(`SELECT pg_get_serial_sequence($1, 'id') AS s`, [db.table]);
      const name = sequence.rows[0]?.s;
      if (!name) return live + 1;
      const { rows } = await db.executor.query<{ last_value: number | string; is_called: boolean }>(`SELECT last_value, is_called FROM ${name}`);
      const row = rows[0];
      return row ? Number(row.last_value) + (row.is_called ? 1 : 0) : live + 1;
    },
    raise: async (db, highest) => void (await db.executor.query(`SELECT setval(pg_get_serial_sequence($1, 'id'), $2)`, [db.table, highest])),
    dropTaken: null,
  },
  sqlite: {
    next: async (db, live) =>
      Math.max(await one(db, `SELECT seq AS n FROM ${qualified("sqlite", db.settings.schema, "sqlite_sequence")} WHERE name = $1`, [TABLE_NAME]), live) + 1,
    raise: async (db, highest) =>
      void (await db.executor.query(`UPDATE ${qualified("sqlite", db.settings.schema, "sqlite_sequence")} SET seq = $1 WHERE name = $2 AND seq < $1`, [
        highest,
        TABLE_NAME,
      ])),
    dropTaken: async (db) => (await db.executor.query(`DELETE FROM ${db.historyTable} WHERE id IN (SELECT id FROM ${db.table})`)).rowCount,
  },
  mysql: {
    // information_schema's AUTO_INCREMENT may be cached: ask for the table's own statistics.
    next: async (db, live) => {
      const { rows } = await db.executor.query<Record<string, unknown>>(
        `SHOW TABLE STATUS ${db.settings.schema ? `FROM \`${db.settings.schema}\` ` : ""}LIKE '${TABLE_NAME}'`,
      );
      return Math.max(Number(rows[0]?.Auto_increment ?? 0), live + 1);
    },
    // InnoDB moves its counter past an id written explicitly, rolled back or not; ALTER TABLE
    // would do the same but commit the caller's transaction, if this runs inside one.
    raise: (db, highest) =>
      db.executor.transaction(async (tx) => {
        await tx.query(`INSERT INTO ${db.table} (id, queue, task, status) VALUES ($1, '', '', 'cancelled')`, [highest]);
        await tx.query(`DELETE FROM ${db.table} WHERE id = $1`, [highest]);
      }),
    dropTaken: async (db) => (await db.executor.query(`DELETE h FROM ${db.historyTable} AS h JOIN ${db.table} AS j ON j.id = h.id`)).rowCount,
  },
};

/** The live table's next id and history's highest, when the first is not above the second; else null. */
export async function idsBehindHistory(db: JobsDatabase): Promise<{ next: number; highest: number } | null> {
  const highest = await one(db, `SELECT max(id) AS n FROM ${db.historyTable}`);
  if (highest === 0) return null;
  const next = await forDialect(COUNTER, db.dialect, "id counter").next(db, await one(db, `SELECT max(id) AS n FROM ${db.table}`));
  return next <= highest ? { next, highest } : null;
}

/**
 * After an ending write was refused by history's primary key (MariaDB, SQLite): sets the live
 * table's id counter above history's highest id, so no later job collides, and deletes the
 * history rows whose id a live job now holds. Those rows are ended jobs of before the restart;
 * keeping them would keep the live jobs that reuse their ids from ever ending. Returns how many
 * rows it deleted; the caller retries its write.
 */
export async function mendReusedIds(db: JobsDatabase): Promise<number> {
  const counter = forDialect(COUNTER, db.dialect, "id counter");
  const behind = await idsBehindHistory(db);
  if (behind) await counter.raise(db, behind.highest);
  if (counter.dropTaken === null) return 0;
  const rowCount = await counter.dropTaken(db);
  if (behind || rowCount > 0) {
    // No logger reaches the write that ends a job: Node's warning channel prints it once to stderr.
    process.emitWarning(
      `the live jobs table's ids restarted below history's (a TRUNCATE of ${TABLE_NAME} alone?): ids now continue after ${behind?.highest ?? "history's highest"}; ${rowCount} ended job(s) in history whose id a live job took were deleted`,
      "ForgeJobsWarning",
    );
  }
  return rowCount;
}
