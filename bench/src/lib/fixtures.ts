import type pg from "pg";

/**
 * Runs `write` with triggers off (session_replication_role = replica), for fixtures of finished
 * rows. The counting trigger on INSERT is a row trigger (its WHEN skips every enqueue, which
 * inserts pending rows): a million done rows inserted by one statement would upsert one counter
 * row a million times in one transaction, each walking that row's growing chain of versions
 * (quadratic: a full run sat on it for 85 minutes). Follow with `rebuildFinishedCounts`.
 */
export async function withTriggersOff(admin: pg.Client, write: () => Promise<void>): Promise<void> {
  await admin.query("SET session_replication_role = replica");
  try {
    await write();
  } finally {
    await admin.query("SET session_replication_role = DEFAULT");
  }
}

/** The finished-job counts of the queue in `schema`, rebuilt from `table` by one aggregate. */
export async function rebuildFinishedCounts(admin: pg.Client, schema: string, table: string): Promise<void> {
  await admin.query(`DELETE FROM ${schema}.jobs_counts`);
  await admin.query(
    `INSERT INTO ${schema}.jobs_counts (queue, tenant, status, shard, n)
     SELECT queue, COALESCE(tenant, ''), status, 0, count(*) FROM ${table} WHERE status IN ('done', 'failed', 'cancelled') GROUP BY 1, 2, 3`,
  );
}

/** Ids of fixture rows written straight into history stay below this; the live table's ids start above it (liveIdsAbove). */
export const FIXTURE_IDS_BELOW = 1_000_000_000;

/**
 * PostgreSQL: `count` done jobs with ids `from` … `from + count - 1`, ended `daysAgo` days ago,
 * written straight into `schema`'s history (where every ended job lives since migration 14),
 * with triggers off (follow with `rebuildFinishedCounts(admin, schema, historyOf(schema))`).
 * Their day's partition is made first, named as the package names it (maintenance/partitions.ts),
 * so that `historyPartitions` and `pruneHistory` see it.
 */
export async function insertEndedPg(admin: pg.Client, schema: string, from: number, count: number, daysAgo: number): Promise<void> {
  const { rows } = await admin.query<{ day: string; next: string }>(
    `SELECT to_char(d, 'YYYY-MM-DD') AS day, to_char(d + 1, 'YYYY-MM-DD') AS next
     FROM (SELECT ((now() - make_interval(days => $1::int)) AT TIME ZONE 'UTC')::date AS d) AS x`,
    [daysAgo],
  );
  const { day, next } = rows[0]!;
  await admin.query(
    `CREATE TABLE IF NOT EXISTS ${schema}.jobs_history_p${day.replaceAll("-", "")} PARTITION OF ${historyOf(schema)}
       FOR VALUES FROM ('${day}T00:00:00Z') TO ('${next}T00:00:00Z')`,
  );
  await withTriggersOff(admin, async () => {
    for (let at = from; at < from + count; at += 1_000_000) {
      const n = Math.min(1_000_000, from + count - at);
      await admin.query(
        `INSERT INTO ${historyOf(schema)} (id, queue, task, payload, status, attempts, max_attempts, run_at, created_at, updated_at, started_at, finished_at)
         SELECT g, 'default', 'noop', jsonb_build_object('i', g), 'done', 1, 1, t, t, t, t, t
         FROM generate_series($1::bigint, $2::bigint) AS g, (SELECT now() - make_interval(days => $3::int) AS t) AS c`,
        [at, at + n - 1, daysAgo],
      );
      process.stdout.write(".");
    }
  });
}

/** `schema`'s history table. */
export function historyOf(schema: string): string {
  return `${schema}.jobs_history`;
}

/** PostgreSQL: the live table's next ids are above FIXTURE_IDS_BELOW, so that no job takes a fixture row's id. */
export async function liveIdsAbove(admin: pg.Client, schema: string): Promise<void> {
  await admin.query(`SELECT setval(pg_get_serial_sequence($1, 'id'), GREATEST($2::bigint, nextval(pg_get_serial_sequence($1, 'id'))))`, [
    `${schema}.jobs`,
    FIXTURE_IDS_BELOW,
  ]);
}

/** PostgreSQL: the highest fixture id in `schema`'s history (0: none). */
export async function highestFixtureId(admin: pg.Client, schema: string): Promise<number> {
  const { rows } = await admin.query<{ n: string | null }>(`SELECT max(id) AS n FROM ${historyOf(schema)} WHERE id < $1`, [FIXTURE_IDS_BELOW]);
  return Number(rows[0]!.n ?? 0);
}

/** PostgreSQL: heap and indexes of every partition of `schema`'s history, pretty-printed. */
export async function historySize(admin: pg.Client, schema: string): Promise<string> {
  const { rows } = await admin.query<{ s: string | null }>(
    `SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid))) AS s FROM pg_inherits WHERE inhparent = $1::regclass`,
    [historyOf(schema)],
  );
  return rows[0]!.s ?? "0 bytes";
}

/** Ended jobs an older version left in the live table of `schema` (a fixture of before migration 14): such a fixture is written again. */
export async function legacyEndedRows(admin: pg.Client, schema: string): Promise<boolean> {
  const { rows } = await admin.query(`SELECT 1 FROM ${schema}.jobs WHERE status IN ('done', 'failed', 'cancelled') LIMIT 1`);
  return rows.length > 0;
}
