import { createHash } from "node:crypto";
import type pg from "pg";
import type { QueryResult } from "./executor.js";

export type Queryable = pg.Pool | pg.PoolClient | pg.Client;

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
