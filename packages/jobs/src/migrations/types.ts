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

/**
 * The per-minute counts of ended jobs (jobs_minutes, migration 10) are a ring: a minute lands
 * in slot `minute % MINUTE_SLOTS`, and a slot written for a later minute starts again from zero.
 * Only jobs that ended within the last MINUTE_HORIZON minutes are counted (or uncounted when
 * they change or go), so a slot never receives a minute older than the one it holds: the table
 * stays at MINUTE_SLOTS rows per (queue, status, shard) and needs no cleaning. The dashboard's
 * chart (60 minutes) must fit within the horizon.
 */
export const MINUTE_SLOTS = 120;
export const MINUTE_HORIZON = 100;
