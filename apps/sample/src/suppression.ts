import { createSqlSuppressionList, suppressionTableSql, type SuppressionList } from "@forge/mail";
import type { AppDatabase, Sql } from "./db.js";

/** The suppression list's table, beside the queue's (same schema). */
function tableName(db: AppDatabase): string {
  return db.jobs.schema ? `${db.jobs.schema}.mail_suppressions` : "mail_suppressions";
}

/** Its DDL, run by migrateApp with the app's other tables. */
export function suppressionTables(db: AppDatabase): string[] {
  return suppressionTableSql(db.jobs.dialect, { table: tableName(db) });
}

/**
 * The addresses never to mail (hard bounces, complaints, unsubscribes, manual entries), in the
 * app's database, through the queue's executor: pass a transaction's `sql` to write inside it.
 * The executor takes `$n` placeholders on every backend (it rewrites them for SQLite).
 */
export function suppressionList(db: AppDatabase, sql: Sql = db.sql): SuppressionList {
  return createSqlSuppressionList({
    query: async (text, params) => (await sql.query(text, [...params])).rows,
    dialect: db.jobs.dialect,
    table: tableName(db),
    placeholders: "$n",
  });
}
