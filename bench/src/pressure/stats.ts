import type pg from "pg";

/** One table of a system at a phase's end (pg_stat_user_tables and pg_total_relation_size). */
export interface TableStat {
  table: string;
  deadTuples: number;
  liveTuples: number;
  /** Heap, indexes and TOAST. */
  bytes: number;
  autovacuums: number;
}

/** Every table of `schema`, in the database `client` is connected to. */
export async function tableStats(client: pg.Client, schema: string): Promise<TableStat[]> {
  const { rows } = await client.query<{ table: string; dead: string; live: string; bytes: string; autovacuums: string }>(
    `SELECT relname AS table, n_dead_tup AS dead, n_live_tup AS live, pg_total_relation_size(relid) AS bytes, autovacuum_count AS autovacuums
       FROM pg_stat_user_tables WHERE schemaname = $1 ORDER BY relname`,
    [schema],
  );
  return rows.map((r) => ({
    table: r.table,
    deadTuples: Number(r.dead),
    liveTuples: Number(r.live),
    bytes: Number(r.bytes),
    autovacuums: Number(r.autovacuums),
  }));
}

/** Total size of the queue tables, a partitioned one counted by its partitions. */
export async function liveBytes(client: pg.Client, hot: string[]): Promise<number> {
  const { rows } = await client.query<{ bytes: string | null }>(
    `SELECT sum(pg_total_relation_size(t.relid)) AS bytes
       FROM unnest($1::text[]) AS h(name),
            LATERAL (SELECT relid FROM pg_partition_tree(h.name::regclass) WHERE isleaf
                     UNION SELECT h.name::regclass WHERE NOT EXISTS (SELECT FROM pg_partition_tree(h.name::regclass))) AS t`,
    [hot],
  );
  return Number(rows[0]!.bytes ?? 0);
}
