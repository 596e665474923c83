import { connect, latestVersion, migrate, type DialectName } from "../../src/index.js";
import { sqlite as sqliteDialect } from "../../src/dialects/sqlite.js";

/**
 * A queue as a version before the live-only jobs table (issue 33) left it: ended jobs in the jobs
 * table, counted by that version's triggers, then migrated to the current schema. Shared by
 * test/upgrade.test.ts and the bench's online-upgrade measure.
 */

/** The last schema version whose jobs table kept ended jobs. */
export const BEFORE_LIVE_ONLY = 13;

/** The migrations table as migrate() makes it, made first so that later versions can be marked applied. */
const MIGRATIONS_DDL: Record<DialectName, (t: string) => string> = {
  postgres: (t) => `CREATE TABLE ${t} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
  sqlite: (t) => `CREATE TABLE ${t} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL DEFAULT 0)`,
  mysql: (t) => `CREATE TABLE ${t} (version INT PRIMARY KEY, name VARCHAR(255) NOT NULL, applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))`,
};

/**
 * Rows per insert statement. PostgreSQL's older counting triggers upsert the same counter row
 * once per inserted row, each walking that row's chain of versions made by the statement so
 * far: a statement's cost grows with the square of its rows (200,000 in one took four minutes).
 */
const CHUNK: Record<DialectName, number> = { postgres: 1000, sqlite: 50_000, mysql: 20_000 };

/**
 * SQL: ended jobs `first` … `last`, job i finished i × `apart` seconds ago: done, failed,
 * cancelled in turn, queues old_a and old_b in turn, two in four a tenant's (acme), as an older
 * version's jobs table held them.
 */
function legacyInsert(dialect: DialectName, table: string, first: number, last: number, apart: number): string {
  const columns = "queue, task, payload, status, attempts, result, tenant, created_at, updated_at, started_at, finished_at, run_at";
  const shape = (i: string, json: (text: string) => string, at: (early: number) => string) =>
    `CASE ${i} % 2 WHEN 0 THEN 'old_a' ELSE 'old_b' END, 'legacy', ${json(`'{"i": 1}'`)},
     CASE ${i} % 3 WHEN 0 THEN 'done' WHEN 1 THEN 'failed' ELSE 'cancelled' END, 1, ${json(`'"ok"'`)},
     CASE WHEN ${i} % 4 < 2 THEN 'acme' END, ${at(5)}, ${at(0)}, ${at(2)}, ${at(0)}, ${at(5)}`;
  switch (dialect) {
    case "postgres":
      return `INSERT INTO ${table} (${columns})
        SELECT ${shape(
          "i",
          (t) => `${t}::jsonb`,
          (early) => `now() - make_interval(secs => i * ${apart} + ${early})`,
        )}
        FROM generate_series(${first}, ${last}) AS g(i) ORDER BY i`;
    case "sqlite":
      return `INSERT INTO ${table} (${columns})
        WITH RECURSIVE g(i) AS (SELECT ${first} UNION ALL SELECT i + 1 FROM g WHERE i < ${last})
        SELECT ${shape(
          "i",
          (t) => t,
          (early) => `CAST(${sqliteDialect.now} - (i * ${apart} + ${early}) * 1000 AS INTEGER)`,
        )} FROM g ORDER BY i`;
    case "mysql":
      // A recursive CTE stops at max_recursive_iterations (1,000): MariaDB's sequence engine instead.
      return `INSERT INTO ${table} (${columns})
        SELECT ${shape(
          "seq",
          (t) => t,
          (early) => `UTC_TIMESTAMP(6) - INTERVAL (seq * ${apart} + ${early}) * 1000000 MICROSECOND`,
        )}
        FROM seq_${first}_to_${last} ORDER BY seq`;
  }
}

/**
 * Makes the queue at `url` (an empty place: `schema` does not exist yet, or a new SQLite file)
 * as an older version left it, with `n` ended jobs `apart` seconds apart in its jobs table, then
 * migrates it to the current schema. Returns the versions that second migrate applied.
 */
export async function leaveLegacyRows(url: string, schema: string | undefined, n: number, apart: number): Promise<number[]> {
  const db = connect(url, schema ? { schema } : {});
  try {
    if (db.dialect === "postgres") await db.executor.query(`CREATE SCHEMA "${schema}"`);
    if (db.dialect === "mysql") await db.executor.query(`CREATE DATABASE \`${schema}\``);
    await db.executor.query(MIGRATIONS_DDL[db.dialect](db.migrationsTable));
    const later: number[] = [];
    for (let v = BEFORE_LIVE_ONLY + 1; v <= latestVersion(db.dialect); v++) later.push(v);
    for (const v of later) await db.executor.query(`INSERT INTO ${db.migrationsTable} (version, name) VALUES ($1, 'later')`, [v]);
    await migrate({ db });
    for (let first = 1; first <= n; first += CHUNK[db.dialect]) {
      await db.executor.query(legacyInsert(db.dialect, db.table, first, Math.min(n, first + CHUNK[db.dialect] - 1), apart));
    }
    await db.executor.query(`DELETE FROM ${db.migrationsTable} WHERE version > ${BEFORE_LIVE_ONLY}`);
    return (await migrate({ db })).applied;
  } finally {
    await db.close();
  }
}
