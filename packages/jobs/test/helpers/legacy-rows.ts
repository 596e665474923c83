import { migrate } from "../../src/index.js";
import { STORED_COLUMNS } from "../../src/core/job-row.js";
import type { TestDatabase } from "./backends.js";

/** The migration that counts ended jobs in the history table and counts the legacy rows once (migrations/history-counts.ts). */
const COUNTS_IN_HISTORY = 15;

/**
 * Turns the ended jobs `ids` (in the history table) into legacy rows: ended rows in the live
 * table, as a database upgraded from an older version holds them until the online upgrade moved
 * them, counted as migration 15 counts them (it runs again here and counts everything anew).
 */
export async function makeLegacy(t: TestDatabase, ids: readonly number[]): Promise<void> {
  const columns = STORED_COLUMNS.join(", ");
  const list = ids.map((_, i) => `$${i + 1}`).join(", ");
  const overriding = t.db.dialect === "postgres" ? "OVERRIDING SYSTEM VALUE " : "";
  await t.sql(`INSERT INTO {jobs} (${columns}) ${overriding}SELECT ${columns} FROM {history} WHERE id IN (${list})`, [...ids]);
  await t.sql(`DELETE FROM {history} WHERE id IN (${list})`, [...ids]);
  await recount(t);
}

/** Runs migration 15 again: the counts are computed anew from both tables, legacy rows included. */
export async function recount(t: TestDatabase): Promise<void> {
  await t.sql(`DELETE FROM ${t.db.migrationsTable} WHERE version = ${COUNTS_IN_HISTORY}`);
  await migrate({ db: t.db });
}
