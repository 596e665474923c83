import { COUNT_SHARDS, MINUTE_HORIZON, MINUTE_SLOTS, type Migration } from "./types.js";

/** The finished states, as SQL. */
const FINISHED = "('done', 'failed', 'cancelled')";

/**
 * The function of a statement trigger that counts what a statement changed into `counts`:
 * `upsert` of `rows(relation, ±1)` read from its transition tables (an insert's new rows in, a
 * delete's old ones out, an update's old version out and its new one in); TRUNCATE runs
 * `truncated` (by default, empties the counts with the table).
 */
export function countingFunction(
  fn: string,
  counts: string,
  upsert: (select: string) => string,
  rows: (relation: string, delta: 1 | -1) => string,
  truncated = `DELETE FROM ${counts};`,
): string {
  return `CREATE OR REPLACE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP = 'TRUNCATE' THEN
            ${truncated}
          ELSIF TG_OP = 'DELETE' THEN
            ${upsert(rows("old_rows", -1))};
          ELSIF TG_OP = 'INSERT' THEN
            ${upsert(rows("new_rows", 1))};
          ELSE
            ${upsert(`${rows("new_rows", 1)} UNION ALL ${rows("old_rows", -1)}`)};
          END IF;
          RETURN NULL;
        END
        $$`;
}

/**
 * Adds `select`'s (queue, tenant, status, delta) rows to jobs_counts `counts`, one upsert per
 * (queue, tenant, status), on the shard of the writing connection.
 */
export function countsUpsert(counts: string, select: string): string {
  return `INSERT INTO ${counts} AS c (queue, tenant, status, shard, n)
           SELECT queue, tenant, status, pg_backend_pid() % ${COUNT_SHARDS}, sum(delta) FROM (${select}) AS d
           GROUP BY queue, tenant, status HAVING sum(delta) <> 0
           ON CONFLICT (queue, tenant, status, shard) DO UPDATE SET n = c.n + excluded.n`;
}

/** The finished rows of `relation` as (queue, tenant, status, delta) rows for countsUpsert. */
export function countedRows(relation: string, delta: 1 | -1): string {
  return `SELECT queue, COALESCE(tenant, '') AS tenant, status, ${delta} AS delta FROM ${relation} WHERE status IN ${FINISHED}`;
}

/** Adds `select`'s (minute, queue, status, delta) rows to jobs_minutes `minutes`, in the ring's way (see version 10). */
export function minutesUpsert(minutes: string, select: string): string {
  return `INSERT INTO ${minutes} AS m (slot, queue, status, shard, minute, n)
           SELECT (minute % ${MINUTE_SLOTS})::integer, queue, status, pg_backend_pid() % ${COUNT_SHARDS}, minute, sum(delta) FROM (${select}) AS d
           GROUP BY minute, queue, status HAVING sum(delta) <> 0
           ON CONFLICT (slot, queue, status, shard) DO UPDATE
           SET n = CASE WHEN m.minute = excluded.minute THEN m.n + excluded.n WHEN m.minute < excluded.minute THEN excluded.n ELSE m.n END,
               minute = GREATEST(m.minute, excluded.minute)`;
}

/** The rows of `relation` that ended done or failed within the horizon, as (minute, queue, status, delta) rows for minutesUpsert. */
export function minuteRows(relation: string, delta: 1 | -1): string {
  return `SELECT floor(extract(epoch from finished_at) / 60)::bigint AS minute, queue, status, ${delta} AS delta FROM ${relation}
         WHERE status IN ('done', 'failed') AND finished_at >= now() - interval '${MINUTE_HORIZON} minutes'`;
}

/** Migration 7: finished jobs per queue, tenant and status (jobs_counts), kept by triggers. */
export const finishedCounts: Migration = {
  version: 7,
  name: "finished_counts",
  // Counts of finished jobs, kept by triggers in the transaction that changes a row, so that
  // statusCounts never counts a table of millions of finished rows: pending and running are
  // counted through their partial indexes (bounded by the live rows), done/failed/cancelled
  // are summed from here. Triggers rather than the queue's own writes: every path that ends,
  // retries, cancels or deletes a job (the queue's, an operator's SQL) keeps the counts.
  // Sharded by the writing connection (pg_backend_pid() % COUNT_SHARDS) so that concurrent
  // completions do not queue on one hot row; a shard's n may go negative (a prune on one
  // connection of jobs another finished): only the sum means anything. tenant '' = none.
  //
  // UPDATE and DELETE are counted per statement, from its transition tables, in one upsert
  // per (queue, tenant, status): a row trigger upserting the same counter row once per row
  // walks that row's growing chain of versions inside the transaction, a prune batch of 1,000
  // rows paid a quarter of a second for it. INSERT stays a row trigger whose WHEN skips every
  // enqueue (pending) without calling anything.
  statements: ({ table, named, index }) => {
    const counts = named("jobs_counts");
    const fn = named("jobs_count_finished");
    const rowFn = named("jobs_count_inserted");
    const finished = FINISHED;
    const upsert = (select: string) => countsUpsert(counts, select);
    return [
      // The waiting count of statusCounts reads the waiting jobs only (dependencies, migration 6).
      `CREATE INDEX IF NOT EXISTS ${index("jobs_waiting")} ON ${table} (queue) WHERE status = 'waiting'`,
      `CREATE TABLE IF NOT EXISTS ${counts} (
          queue text NOT NULL,
          tenant text NOT NULL DEFAULT '',
          status text NOT NULL CHECK (status IN ${finished}),
          shard integer NOT NULL,
          n bigint NOT NULL DEFAULT 0,
          PRIMARY KEY (queue, tenant, status, shard)
        )`,
      countingFunction(fn, counts, upsert, countedRows),
      `CREATE OR REPLACE FUNCTION ${rowFn}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO ${counts} AS c (queue, tenant, status, shard, n)
            VALUES (NEW.queue, COALESCE(NEW.tenant, ''), NEW.status, pg_backend_pid() % ${COUNT_SHARDS}, 1)
            ON CONFLICT (queue, tenant, status, shard) DO UPDATE SET n = c.n + 1;
          RETURN NULL;
        END
        $$`,
      `CREATE OR REPLACE TRIGGER jobs_count_insert AFTER INSERT ON ${table} FOR EACH ROW WHEN (NEW.status IN ${finished}) EXECUTE FUNCTION ${rowFn}()`,
      `CREATE OR REPLACE TRIGGER jobs_count_delete AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      `CREATE OR REPLACE TRIGGER jobs_count_update AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      // TRUNCATE fires no row trigger: it empties the counts with the table.
      `CREATE OR REPLACE TRIGGER jobs_count_truncate AFTER TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      // The jobs already finished; CREATE TRIGGER locked the table against writes until this
      // transaction commits, so none is counted twice or missed.
      `INSERT INTO ${counts} (queue, tenant, status, shard, n)
          SELECT queue, COALESCE(tenant, ''), status, 0, count(*) FROM ${table} WHERE status IN ${finished} GROUP BY queue, COALESCE(tenant, ''), status
          ON CONFLICT (queue, tenant, status, shard) DO NOTHING`,
    ];
  },
};

/** Migration 10: jobs ended per queue and minute (jobs_minutes), kept by triggers. */
export const finishedMinutes: Migration = {
  version: 10,
  name: "finished_minutes",
  // Jobs that ended done or failed, per queue and minute of finished_at: what the dashboard's
  // chart reads, instead of counting every job of the last hour (millions at real throughput).
  // Kept like jobs_counts (migration 7): by triggers, per statement from the transition tables,
  // sharded by connection, a row's change counted as -1 for its old version and +1 for its new
  // one (a backdated or deleted job moves or leaves its minute). A ring of MINUTE_SLOTS slots
  // (types.ts): only versions that ended within MINUTE_HORIZON minutes are counted, so pruning
  // old jobs costs nothing here and a slot is only ever written for its own minute or a later
  // one, which starts it again. `minute` is minutes since the epoch.
  statements: ({ table, named }) => {
    const minutes = named("jobs_minutes");
    const fn = named("jobs_count_minutes");
    const rowFn = named("jobs_count_minute_inserted");
    const upsert = (select: string) => minutesUpsert(minutes, select);
    const rows = minuteRows;
    return [
      `CREATE TABLE IF NOT EXISTS ${minutes} (
          slot integer NOT NULL,
          queue text NOT NULL,
          status text NOT NULL CHECK (status IN ('done', 'failed')),
          shard integer NOT NULL,
          minute bigint NOT NULL,
          n bigint NOT NULL,
          PRIMARY KEY (slot, queue, status, shard)
        )`,
      countingFunction(fn, minutes, upsert, rows),
      `CREATE OR REPLACE FUNCTION ${rowFn}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          ${upsert(`SELECT floor(extract(epoch from NEW.finished_at) / 60)::bigint AS minute, NEW.queue AS queue, NEW.status AS status, 1 AS delta`)};
          RETURN NULL;
        END
        $$`,
      `CREATE OR REPLACE TRIGGER jobs_minute_insert AFTER INSERT ON ${table} FOR EACH ROW
          WHEN (NEW.status IN ('done', 'failed') AND NEW.finished_at >= now() - interval '${MINUTE_HORIZON} minutes') EXECUTE FUNCTION ${rowFn}()`,
      `CREATE OR REPLACE TRIGGER jobs_minute_delete AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      `CREATE OR REPLACE TRIGGER jobs_minute_update AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      `CREATE OR REPLACE TRIGGER jobs_minute_truncate AFTER TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION ${fn}()`,
      // The jobs that ended within the horizon already; CREATE TRIGGER locked the table against
      // writes until this transaction commits, so none is counted twice or missed.
      `DELETE FROM ${minutes}`,
      upsert(rows(table, 1)),
    ];
  },
};
