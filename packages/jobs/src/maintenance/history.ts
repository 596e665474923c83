import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { qualified, quoteIdent } from "../db/identifiers.js";
import { JobError } from "../base/errors.js";
import { keptForFlows } from "../dependencies/flow-prune.js";
import type { FinishedStatus } from "./prune-batch.js";

/**
 * The history table (PostgreSQL, migration 8): finished jobs moved out of the jobs table,
 * range-partitioned by finished time, one partition per UTC day, so that retention drops whole
 * partitions (instant, no row deleted, nothing for vacuum) instead of deleting rows one by one.
 */
import { HISTORY_TABLE } from "../core/database.js";
export { HISTORY_TABLE };

/** A partition's name: the history table's with the UTC day it holds, `jobs_history_p20261201`. */
const PARTITION = /^jobs_history_p(\d{4})(\d{2})(\d{2})$/;

/** PostgreSQL's SQLSTATE for an insert into a partitioned table with no partition for the row. */
const NO_PARTITION_FOR_ROW = "23514";

/** How long a DROP of a partition waits for its lock on the history table before giving up (it is retried at the next run). */
const DROP_LOCK_TIMEOUT = "10s";

export function historyTable(db: JobsDatabase): string {
  return db.historyTable;
}

/** The history table is PostgreSQL's: elsewhere, a JobError that says what to do instead. */
export function checkHistoryDialect(db: JobsDatabase, where: string, field: string): void {
  if (db.dialect === "postgres") return;
  const backend = db.dialect === "mysql" ? "MariaDB" : "SQLite";
  throw new JobError(
    `${where}: the history table is PostgreSQL only (range partitions by finished time); on ${backend} finished jobs are pruned by deleting them: leave ${field} out`,
    field,
  );
}

/** The history table's columns, read once per database: the same as the jobs table's (migrations add columns to both). */
const columnsOf = new WeakMap<JobsDatabase, Promise<string>>();
function historyColumns(db: JobsDatabase): Promise<string> {
  let columns = columnsOf.get(db);
  if (!columns) {
    columns = db.executor
      .query<{ name: string }>(`SELECT attname AS name FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, [
        historyTable(db),
      ])
      .then(({ rows }) => {
        if (rows.length === 0) throw new JobError(`the history table ${historyTable(db)} is missing: run migrate() (migration 8)`, "db");
        return rows.map((r) => quoteIdent("postgres", r.name)).join(", ");
      });
    columns.catch(() => columnsOf.delete(db));
    columnsOf.set(db, columns);
  }
  return columns;
}

function partitionName(day: string): string {
  return `${HISTORY_TABLE}_p${day.replaceAll("-", "")}`;
}

/** The UTC day after `day` (YYYY-MM-DD). */
function nextDay(day: string): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().slice(0, 10);
}

/**
 * Creates the partitions of `days` that do not exist yet. Serialised by an advisory lock:
 * two movers creating the same partition at once would otherwise race on the catalog.
 */
async function ensurePartitions(db: JobsDatabase, days: readonly string[]): Promise<void> {
  const parent = historyTable(db);
  await db.executor.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`forge_jobs_history:${db.schema ?? ""}`]);
    for (const day of days) {
      await tx.query(
        `CREATE TABLE IF NOT EXISTS ${qualified("postgres", db.schema, partitionName(day))} PARTITION OF ${parent}
           FOR VALUES FROM ('${day}T00:00:00Z') TO ('${nextDay(day)}T00:00:00Z')`,
      );
    }
  });
}

/**
 * Makes the partitions of the UTC days `from` … `to` days from the server's today (−1 … 1:
 * yesterday, today, tomorrow) that do not exist yet. The server's clock, as every ending
 * write's `now()` is.
 */
export async function ensureDays(db: JobsDatabase, from: number, to: number): Promise<void> {
  const { rows } = await db.executor.query<{ day: string }>(
    `SELECT to_char((now() AT TIME ZONE 'UTC')::date + d, 'YYYY-MM-DD') AS day FROM generate_series($1::int, $2::int) AS d`,
    [from, to],
  );
  const existing = new Set((await listPartitions(db)).map((p) => p.day));
  const missing = rows.map((r) => r.day).filter((day) => !existing.has(day));
  if (missing.length > 0) await ensurePartitions(db, missing);
}

/**
 * Moves up to `batch` finished jobs of `statuses` that ended more than `olderThan` seconds ago
 * into the history table, oldest first, applying the same flow rule as prune (a job a waiting
 * job or an unfinished batch still needs stays). The move itself is one statement (DELETE …
 * RETURNING into INSERT): a job is in exactly one of the two tables at every instant.
 */
export async function moveBatch(db: JobsDatabase, olderThan: number, statuses: readonly FinishedStatus[], batch: number): Promise<number> {
  const columns = await historyColumns(db);
  const picked = (select: string, bound: string) => `SELECT ${select} FROM ${db.table} AS j
      WHERE j.status IN (${statuses.map((s) => `'${s}'`).join(", ")}) AND j.finished_at < ${db.sql.nowPlus("$1", "-")}${bound}
        AND ${keptForFlows(db, "j")}
      ORDER BY j.finished_at LIMIT $2`;
  for (;;) {
    // The days this batch will touch get their partition first: a row with no partition to go
    // to would fail the whole statement.
    const { rows } = await db.executor.query<{ day: string }>(
      `SELECT DISTINCT to_char(p.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM (${picked("j.finished_at", "")}) AS p ORDER BY day`,
      [olderThan, batch],
    );
    if (rows.length === 0) return 0;
    const days = rows.map((r) => r.day);
    await ensurePartitions(db, days);
    try {
      // The ids as an array (an InitPlan), so the DELETE probes the primary key for each instead
      // of joining the whole table; rows past the last day made ready wait for the next batch.
      const { rowCount } = await db.executor.query(
        `WITH moved AS (
           DELETE FROM ${db.table} WHERE id = ANY (ARRAY(${picked("j.id", " AND j.finished_at < $3::timestamptz")} FOR UPDATE SKIP LOCKED))
           RETURNING ${columns})
         INSERT INTO ${historyTable(db)} (${columns}) SELECT ${columns} FROM moved`,
        [olderThan, batch, `${nextDay(days.at(-1)!)}T00:00:00Z`],
      );
      return rowCount;
    } catch (error) {
      // A row of a day between two made ready (written meanwhile with an old finish time): the
      // statement moved nothing; the next turn's read of the days includes it.
      if ((error as { code?: string }).code !== NO_PARTITION_FOR_ROW) throw error;
    }
  }
}

/** One partition of the history table. */
export interface HistoryPartition {
  /** The UTC day it holds, `YYYY-MM-DD`. */
  day: string;
  /** Rows, as PostgreSQL's statistics estimate them (after ANALYZE or autovacuum; 0 before). */
  rows: number;
  /** Its size on disk, indexes included. */
  bytes: number;
}

/** The history table's partitions, oldest first. */
export async function listPartitions(db: JobsDatabase, tx: Executor = db.executor): Promise<HistoryPartition[]> {
  const { rows } = await tx.query<{ name: string; rows: number | string; bytes: number | string }>(
    `SELECT c.relname AS name, GREATEST(c.reltuples, 0)::bigint AS rows, pg_total_relation_size(c.oid) AS bytes
     FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass`,
    [historyTable(db)],
  );
  const partitions: HistoryPartition[] = [];
  for (const row of rows) {
    const m = PARTITION.exec(row.name);
    if (m) partitions.push({ day: `${m[1]}-${m[2]}-${m[3]}`, rows: Number(row.rows), bytes: Number(row.bytes) });
  }
  return partitions.sort((a, b) => a.day.localeCompare(b.day));
}

/**
 * Drops the partitions whose whole day ended more than `olderThan` seconds ago (by the
 * database's clock); returns their days. Each DROP waits at most DROP_LOCK_TIMEOUT for the lock
 * on the history table (a long read of it would otherwise queue every reader behind the DROP).
 */
export async function dropPartitions(db: JobsDatabase, olderThan: number): Promise<string[]> {
  const { rows } = await db.executor.query<{ cutoff: string }>(
    `SELECT to_char((now() - make_interval(secs => $1)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cutoff`,
    [olderThan],
  );
  const cutoff = Date.parse(rows[0]!.cutoff);
  const dropped: string[] = [];
  for (const { day } of await listPartitions(db)) {
    if (Date.parse(`${nextDay(day)}T00:00:00Z`) > cutoff) continue;
    await db.executor.transaction(async (tx) => {
      await tx.query(`SET LOCAL lock_timeout = '${DROP_LOCK_TIMEOUT}'`);
      await tx.query(`DROP TABLE IF EXISTS ${qualified("postgres", db.schema, partitionName(day))}`);
    });
    dropped.push(day);
  }
  return dropped;
}

/** An archived job's row, read by id (getJob falls back to it): every partition's id index is probed. */
export async function readArchived(db: JobsDatabase, selectList: string, id: number, tenant: string | null): Promise<Record<string, unknown> | undefined> {
  const { rows } = await db.executor.query(
    `SELECT ${selectList} FROM ${historyTable(db)} WHERE id = $1${tenant === null ? "" : " AND tenant = $2"}`,
    tenant === null ? [id] : [id, tenant],
  );
  return rows[0] as Record<string, unknown> | undefined;
}

/**
 * Brings an archived failed or cancelled job back into the jobs table, unchanged, in the
 * caller's transaction (retryJob then puts it back in its queue); false when there is none.
 */
export async function restoreArchived(db: JobsDatabase, tx: Executor, id: number, tenant: string | null): Promise<boolean> {
  const columns = await historyColumns(db);
  const { rowCount } = await tx.query(
    `WITH back AS (
       DELETE FROM ${historyTable(db)} WHERE id = $1 AND status IN ('failed', 'cancelled')${tenant === null ? "" : " AND tenant = $2"}
       RETURNING ${columns})
     INSERT INTO ${db.table} (${columns}) OVERRIDING SYSTEM VALUE SELECT ${columns} FROM back`,
    tenant === null ? [id] : [id, tenant],
  );
  return rowCount > 0;
}
