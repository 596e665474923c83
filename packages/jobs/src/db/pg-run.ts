import { createHash } from "node:crypto";
import type pg from "pg";
import type { QueryResult } from "./executor.js";

export type Queryable = pg.Pool | pg.PoolClient | pg.Client;

/**
 * The session setting of the connections on which the queue names its statements (see PgMode).
 * Sent as the connection's first statement rather than as a startup `options` parameter, which
 * poolers in session mode refuse.
 */
export const PLAN_EACH_RUN = "SET plan_cache_mode = force_custom_plan";

/** SQLSTATE undefined_object: `SET` of a setting the server does not have. */
const UNDEFINED_SETTING = "42704";

/** Runs PLAN_EACH_RUN on a new connection; before PostgreSQL 12 (no such setting) plans are the server's choice. */
export async function planEachRun(client: pg.Client): Promise<void> {
  try {
    await client.query(PLAN_EACH_RUN);
  } catch (error) {
    if ((error as { code?: unknown }).code !== UNDEFINED_SETTING) throw error;
  }
}

const preparedNames = new Map<string, string>();

/**
 * pg keeps a named statement per connection, keyed by name: the same name must always mean the
 * same text. The text embeds the schema, so the name carries a hash of it.
 */
function preparedName(name: string, sql: string): string {
  let found = preparedNames.get(sql);
  if (!found) {
    found = `forge_${name}_${createHash("sha1").update(sql).digest("hex").slice(0, 12)}`;
    if (preparedNames.size < 500) preparedNames.set(sql, found);
  }
  return found;
}

export async function run<R extends object>(
  on: Queryable,
  sql: string,
  params: readonly unknown[] | undefined,
  name: string | undefined,
): Promise<QueryResult<R>> {
  const config: pg.QueryConfig = name ? { name: preparedName(name, sql), text: sql, values: params as unknown[] } : { text: sql, values: params as unknown[] };
  const result = await on.query<R>(config);
  return { rows: result.rows, rowCount: result.rowCount ?? result.rows.length };
}
