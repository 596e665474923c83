import { COUNT_SHARDS, MINUTE_HORIZON, MINUTE_SLOTS } from "./types.js";

/**
 * MariaDB's row triggers that keep jobs_counts (migration 7) and jobs_minutes (migration 10),
 * built for the table they count (the jobs table then, the history table since migration 15),
 * and the statements that add a whole relation's rows to either. The shard is
 * CONNECTION_ID() % COUNT_SHARDS (see migrations/postgres-counts.ts).
 */

const FINISHED = "('done', 'failed', 'cancelled')";

/** The triggers of migration 7 and 10 by name: each schema holds one of each name. */
export const MYSQL_COUNT_TRIGGERS = ["jobs_count_insert", "jobs_count_delete", "jobs_count_update"] as const;
export const MYSQL_MINUTE_TRIGGERS = ["jobs_minute_insert", "jobs_minute_delete", "jobs_minute_update"] as const;

/** Minutes since the epoch of a DATETIME expression. */
export function minuteOf(timestamp: string): string {
  return `TIMESTAMPDIFF(MINUTE, TIMESTAMP'1970-01-01 00:00:00', ${timestamp})`;
}

/** Whether `row` (OLD., NEW., or "" for a plain column) ended done or failed within the horizon: what jobs_minutes counts. */
export function minuteCounted(row: string): string {
  return `${row}status IN ('done', 'failed') AND ${row}finished_at >= UTC_TIMESTAMP(6) - INTERVAL ${MINUTE_HORIZON} MINUTE`;
}

/** The ring's update of a slot (see postgres-counts.ts, version 10): assignments run left to right, n while minute is the old one. */
const RING = "n = CASE WHEN minute = VALUES(minute) THEN n + VALUES(n) WHEN minute < VALUES(minute) THEN VALUES(n) ELSE n END";

/** An upsert into jobs_minutes of `values` (a VALUES list or a SELECT of slot, queue, status, shard, minute, n). */
export function minutesUpsert(minutes: string, values: string, n = RING): string {
  return `INSERT INTO ${minutes} (slot, queue, status, shard, minute, n) ${values}
           ON DUPLICATE KEY UPDATE ${n}, minute = GREATEST(minute, VALUES(minute))`;
}

/** Migration 7's row triggers on `table`, keeping jobs_counts `counts`. */
export function countTriggers(table: string, counts: string, named: (name: string) => string): string[] {
  const bump = (row: "OLD" | "NEW", delta: 1 | -1) =>
    `INSERT INTO ${counts} (queue, tenant, status, shard, n)
           VALUES (${row}.queue, COALESCE(${row}.tenant, ''), ${row}.status, CONNECTION_ID() % ${COUNT_SHARDS}, ${delta})
           ON DUPLICATE KEY UPDATE n = n + ${delta};`;
  const moved = "NOT (OLD.status <=> NEW.status AND OLD.queue <=> NEW.queue AND OLD.tenant <=> NEW.tenant)";
  return [
    `CREATE TRIGGER IF NOT EXISTS ${named("jobs_count_insert")} AFTER INSERT ON ${table} FOR EACH ROW
          BEGIN IF NEW.status IN ${FINISHED} THEN ${bump("NEW", 1)} END IF; END`,
    `CREATE TRIGGER IF NOT EXISTS ${named("jobs_count_delete")} AFTER DELETE ON ${table} FOR EACH ROW
          BEGIN IF OLD.status IN ${FINISHED} THEN ${bump("OLD", -1)} END IF; END`,
    `CREATE TRIGGER IF NOT EXISTS ${named("jobs_count_update")} AFTER UPDATE ON ${table} FOR EACH ROW
          BEGIN
            IF ${moved} THEN
              IF OLD.status IN ${FINISHED} THEN ${bump("OLD", -1)} END IF;
              IF NEW.status IN ${FINISHED} THEN ${bump("NEW", 1)} END IF;
            END IF;
          END`,
  ];
}

/** Migration 10's row triggers on `table`, keeping jobs_minutes `minutes`. */
export function minuteTriggers(table: string, minutes: string, named: (name: string) => string): string[] {
  const bump = (row: "OLD" | "NEW", delta: 1 | -1) =>
    `${minutesUpsert(minutes, `VALUES (${minuteOf(`${row}.finished_at`)} % ${MINUTE_SLOTS}, ${row}.queue, ${row}.status, CONNECTION_ID() % ${COUNT_SHARDS}, ${minuteOf(`${row}.finished_at`)}, ${delta})`)};`;
  const moved = "NOT (OLD.status <=> NEW.status AND OLD.queue <=> NEW.queue AND OLD.finished_at <=> NEW.finished_at)";
  return [
    `CREATE TRIGGER IF NOT EXISTS ${named("jobs_minute_insert")} AFTER INSERT ON ${table} FOR EACH ROW
          BEGIN IF ${minuteCounted("NEW.")} THEN ${bump("NEW", 1)} END IF; END`,
    `CREATE TRIGGER IF NOT EXISTS ${named("jobs_minute_delete")} AFTER DELETE ON ${table} FOR EACH ROW
          BEGIN IF ${minuteCounted("OLD.")} THEN ${bump("OLD", -1)} END IF; END`,
    `CREATE TRIGGER IF NOT EXISTS ${named("jobs_minute_update")} AFTER UPDATE ON ${table} FOR EACH ROW
          BEGIN
            IF ${moved} THEN
              IF ${minuteCounted("OLD.")} THEN ${bump("OLD", -1)} END IF;
              IF ${minuteCounted("NEW.")} THEN ${bump("NEW", 1)} END IF;
            END IF;
          END`,
  ];
}

/**
 * Adds to jobs_counts the finished rows of `relation` (a table or an aliased subquery of queue,
 * tenant, status) times `delta`, on `shard` (an SQL expression).
 */
export function countsFrom(counts: string, relation: string, delta: 1 | -1, shard = `CONNECTION_ID() % ${COUNT_SHARDS}`): string {
  return `INSERT INTO ${counts} (queue, tenant, status, shard, n)
          SELECT queue, COALESCE(tenant, ''), status, ${shard}, ${delta} * count(*) FROM ${relation} WHERE status IN ${FINISHED}
          GROUP BY queue, COALESCE(tenant, ''), status
          ON DUPLICATE KEY UPDATE n = n + VALUES(n)`;
}

/** Adds to jobs_minutes the rows of `relation` that ended within the horizon, times `delta`, on `shard`. */
export function minutesFrom(minutes: string, relation: string, delta: 1 | -1, shard = `CONNECTION_ID() % ${COUNT_SHARDS}`, n = RING): string {
  return minutesUpsert(
    minutes,
    `SELECT ${minuteOf("finished_at")} % ${MINUTE_SLOTS}, queue, status, ${shard}, ${minuteOf("finished_at")}, ${delta} * count(*) FROM ${relation}
           WHERE ${minuteCounted("")} GROUP BY ${minuteOf("finished_at")}, queue, status`,
    n,
  );
}
