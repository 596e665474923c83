import type { TestDatabase } from "../../helpers/backends.js";
import { keyText } from "./dialect.js";

/**
 * The two tables the fixture worker's `effect` handler writes, next to the jobs table: one row
 * per run, keyed (job, attempt), naming the worker that ran it; and one row per job (its first
 * run). A job that ran twice has two rows in the first; a job that never ran has none in the second.
 */
export async function effectTables(t: TestDatabase): Promise<{ effects: string; first: string }> {
  const effects = t.tableName("effects");
  const first = t.tableName("first_effect");
  await t.sql(
    `CREATE TABLE ${effects} (job_id bigint NOT NULL, attempt integer NOT NULL, worker ${keyText(t.db.dialect)} NOT NULL, PRIMARY KEY (job_id, attempt))`,
  );
  await t.sql(`CREATE TABLE ${first} (job_id bigint NOT NULL PRIMARY KEY, attempt integer NOT NULL)`);
  return { effects, first };
}
