import { HISTORY_TABLE, type JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { qualified } from "../db/identifiers.js";

/**
 * PostgreSQL's history table is range-partitioned by the UTC day jobs ended (migration 8): its
 * days, made before rows arrive (an INSERT with no partition for its row fails) and listed for
 * retention. Imports nothing that writes jobs: the ending writes (run/ended.ts) and the
 * maintenance over history (history.ts) both build on it.
 */

/** A partition's name: the history table's with the UTC day it holds, `jobs_history_p20261201`. */
const PARTITION = /^jobs_history_p(\d{4})(\d{2})(\d{2})$/;

export function partitionName(day: string): string {
  return `${HISTORY_TABLE}_p${day.replaceAll("-", "")}`;
}

/** The UTC day after `day` (YYYY-MM-DD). */
export function nextDay(day: string): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().slice(0, 10);
}

/**
 * Creates the partitions of `days` that do not exist yet. Serialised by an advisory lock:
 * two movers creating the same partition at once would otherwise race on the catalog.
 */
export async function ensurePartitions(db: JobsDatabase, days: readonly string[]): Promise<void> {
  const parent = db.historyTable;
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
    [db.historyTable],
  );
  const partitions: HistoryPartition[] = [];
  for (const row of rows) {
    const m = PARTITION.exec(row.name);
    if (m) partitions.push({ day: `${m[1]}-${m[2]}-${m[3]}`, rows: Number(row.rows), bytes: Number(row.bytes) });
  }
  return partitions.sort((a, b) => a.day.localeCompare(b.day));
}
