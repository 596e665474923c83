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
