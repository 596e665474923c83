import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { liveCountsBy } from "../maintenance/counts.js";
import { checkFlowName, compareKeys } from "./limits.js";
import { type DatabaseOptions } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import { recentWaits } from "./recent-starts.js";
import { checkInteger } from "../base/validate.js";
import { waitTimes } from "./wait-times.js";

/** The weight of a group with no stored weight. */
export const DEFAULT_GROUP_WEIGHT = 1;
/** `listGroups`' wait percentiles cover jobs started this many seconds back. */
export const GROUP_WAIT_WINDOW_SECONDS = 300;
/** At most this many started jobs are read per group (and five times that in all) for the percentiles. */
export const GROUP_WAIT_SAMPLE = 1000;

/** One fair-share group as `listGroups` reads it. */
export interface GroupStatus {
  group: string;
  /** Its share against the other groups with ready jobs (1 unless set). */
  weight: number;
  /** Pending jobs of the group due now. */
  ready: number;
  running: number;
  /** Wait before start (`started_at - run_at`) of its jobs started in the last 5 minutes, in ms; null when none started. */
  waitP50Ms: number | null;
  waitP95Ms: number | null;
}

const UPSERT_WEIGHT: PerDialect<(db: JobsDatabase) => string> = {
  postgres: (db) =>
    `INSERT INTO ${db.groupsTable} (group_key, weight, updated_at) VALUES ($1, $2, ${db.sql.now})
     ON CONFLICT (group_key) DO UPDATE SET weight = EXCLUDED.weight, updated_at = EXCLUDED.updated_at`,
  sqlite: (db) =>
    `INSERT INTO ${db.groupsTable} (group_key, weight, updated_at) VALUES ($1, $2, ${db.sql.now})
     ON CONFLICT (group_key) DO UPDATE SET weight = excluded.weight, updated_at = excluded.updated_at`,
  mysql: (db) =>
    `INSERT INTO ${db.groupsTable} (group_key, weight, updated_at) VALUES ($1, $2, ${db.sql.now})
     ON DUPLICATE KEY UPDATE weight = VALUES(weight), updated_at = VALUES(updated_at)`,
};

/**
 * Sets a fair-share group's weight: among groups with ready jobs of the same queue and
 * priority, a group of weight 3 gets three claims for each one of a group of weight 1.
 * Weight 1 is the default, so setting it deletes the stored row.
 */
export async function setGroupWeight(group: string, weight: number, options: DatabaseOptions = {}): Promise<void> {
  checkOptions(options, DATABASE_OPTION_KEYS, "setGroupWeight");
  const key = checkFlowName(group, "group", "setGroupWeight");
  const checked = checkInteger(weight, "weight", 1);
  const db = resolveDb(options.db);
  if (checked === DEFAULT_GROUP_WEIGHT) {
    await db.executor.query(`DELETE FROM ${db.groupsTable} WHERE group_key = $1`, [key]);
    return;
  }
  await db.executor.query(forDialect(UPSERT_WEIGHT, db.dialect, "setGroupWeight")(db), [key, checked]);
}

interface CountRow {
  group_key: string;
  running: number | string | null;
  ready: number | string | null;
}

/**
 * Every group with a stored weight or with pending, running or recently started jobs, ordered
 * by name. Jobs without a group are not listed (the queues' own figures cover them). Read in a
 * read-only transaction.
 */
export async function listGroups(options: DatabaseOptions = {}): Promise<GroupStatus[]> {
  checkOptions(options, DATABASE_OPTION_KEYS, "listGroups");
  const db = resolveDb(options.db);
  return db.executor.transaction(
    async (tx) => {
      const weights = await tx.query<{ group_key: string; weight: number | string }>(`SELECT group_key, weight FROM ${db.groupsTable}`);
      const counts = await tx.query<CountRow>(liveCountsBy(db, "group_key"));
      const byGroup = new Map<string, GroupStatus>();
      const entry = (group: string): GroupStatus => {
        let status = byGroup.get(group);
        if (!status) byGroup.set(group, (status = { group, weight: DEFAULT_GROUP_WEIGHT, ready: 0, running: 0, waitP50Ms: null, waitP95Ms: null }));
        return status;
      };
      for (const row of weights.rows) entry(row.group_key).weight = Number(row.weight);
      for (const row of counts.rows) {
        const status = entry(row.group_key);
        status.running = Number(row.running ?? 0);
        status.ready = Number(row.ready ?? 0);
      }
      // The latest of each group, from the GROUP_WAIT_SAMPLE × 5 jobs that ended last and the running
      // ones (bounded reads: ungrouped jobs among the ended ones take room, and leave a group fewer figures).
      const since = db.sql.nowPlus(String(GROUP_WAIT_WINDOW_SECONDS), "-");
      const sample = { read: GROUP_WAIT_SAMPLE * 5, perKey: GROUP_WAIT_SAMPLE, limit: GROUP_WAIT_SAMPLE * 5, and: " AND group_key <> ''" };
      for (const [group, waits] of await recentWaits(tx, db, "group_key", since, sample)) {
        const { p50, p95 } = waitTimes(waits);
        Object.assign(entry(group), { waitP50Ms: p50, waitP95Ms: p95 });
      }
      return [...byGroup.values()].sort((a, b) => compareKeys(a.group, b.group));
    },
    { readOnly: true },
  );
}
