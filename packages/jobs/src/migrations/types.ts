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
