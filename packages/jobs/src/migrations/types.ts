/** Names a migration's SQL can use: already quoted where they are identifiers. */
export interface SchemaNames {
  /** Quoted, qualified jobs table. */
  table: string;
  /** Quoted schema, or null for the connection's default. */
  schema: string | null;
  /** A sibling table of the jobs table (`jobs_limits`…), quoted and qualified like it. */
  named: (name: string) => string;
  /** Quote an index or constraint name, qualified by schema where the dialect wants it. */
  index: (name: string) => string;
}

export interface Migration {
  version: number;
  name: string;
  statements(names: SchemaNames): string[];
}

/**
 * Rows per (queue, tenant, status) in jobs_counts (migration 7): a connection adds to the
 * shard its id falls in, so concurrent completions rarely wait on one another's counter.
 */
export const COUNT_SHARDS = 16;
