import { JobError } from "../base/errors.js";
import type { JobsDatabase } from "../core/database.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import type { Executor } from "../db/executor.js";
import { qualified } from "../db/identifiers.js";
import type { NewJob } from "../enqueue/new-job.js";
import { SEQUENCES_TABLE } from "../migrations/sequences.js";
import { lockExisting, writePlanned, type ExistingJob, type InsertJobs } from "./flow-enqueue.js";
import type { FlowItem, FlowPlan } from "./flow-spec.js";
import type { SequenceItem } from "./sequence-spec.js";

/**
 * Enqueues sequenced jobs (`sequence`): each depends on its key's previous job while that job
 * has not ended, or ended failed under "hold". In one transaction (the caller's, when `db` is a
 * client inside one) that first locks the key's row: concurrent enqueues of a key take turns,
 * so the key's order is the order its enqueues commit, and ids grow in that order too (each
 * insert comes after the previous one's commit). The previous job is locked as a flow's
 * dependency is (flow-enqueue.ts): it cannot end unseen between the read and the commit.
 */

/** Creates the key's row if needed, locks it and returns its last job's id (null: none yet). */
const LOCK_KEY: PerDialect<(table: string) => string[]> = {
  postgres: (t) => [
    `INSERT INTO ${t} AS s (sequence_key, last_id) VALUES ($1, NULL) ON CONFLICT (sequence_key) DO UPDATE SET last_id = s.last_id RETURNING last_id`,
  ],
  // One writer at a time: the first statement's write lock is the key's lock.
  sqlite: (t) => [`INSERT INTO ${t} (sequence_key, last_id) VALUES ($1, NULL) ON CONFLICT (sequence_key) DO UPDATE SET last_id = last_id RETURNING last_id`],
  mysql: (t) => [`INSERT IGNORE INTO ${t} (sequence_key, last_id) VALUES ($1, NULL)`, `SELECT last_id FROM ${t} WHERE sequence_key = $1 FOR UPDATE`],
};

const BLOCKING = new Set(["pending", "running", "waiting"]);

export async function insertSequenced(
  db: JobsDatabase,
  jobs: NewJob[],
  sequences: readonly (SequenceItem | undefined)[],
  insert: InsertJobs,
  field: (i: number, name: string) => string,
): Promise<number[]> {
  if (db.executor.callerTransactionOpen?.()) {
    // Its statements cannot all run inside a synchronous transaction (better-sqlite3's ends
    // before the first await), and run after it they would lose its rollback.
    throw new JobError(
      "sequence: enqueue cannot join the transaction open on this SQLite handle (a sequenced enqueue takes several statements); enqueue it after your transaction commits",
      "sequence",
    );
  }
  checkTenants(jobs, sequences, field);
  const table = qualified(db.dialect, db.schema, SEQUENCES_TABLE);
  return db.executor.transaction(async (tx) => {
    // Keys locked in one order by every enqueue: two calls sharing two keys cannot deadlock.
    const keys = [...new Set(sequences.flatMap((s) => (s ? [s.key] : [])))].sort();
    const last = new Map<string, number | null>();
    for (const key of keys) last.set(key, await lockKey(db, tx, table, key));
    const lastIds = [...new Set([...last.values()].filter((id): id is number => id !== null))];
    const existing = await lockExisting(db, tx, lastIds);
    const { plan, tails } = planOf(jobs, sequences, last, existing, field);
    const ids = await writePlanned(db, tx, jobs, plan, existing, insert);
    for (const [key, i] of tails) await tx.query(`UPDATE ${table} SET last_id = $2 WHERE sequence_key = $1`, [key, ids[i]]);
    return ids;
  });
}

async function lockKey(db: JobsDatabase, tx: Executor, table: string, key: string): Promise<number | null> {
  let lastId: number | string | null = null;
  for (const sql of forDialect(LOCK_KEY, db.dialect, "sequence lock")(table)) {
    const { rows } = await tx.query<{ last_id: number | string | null }>(sql, [key]);
    if (rows[0]) lastId = rows[0].last_id;
  }
  return lastId === null ? null : Number(lastId);
}

/**
 * Each sequenced item depends on the previous item of its key in this call, else on the key's
 * last job when that one blocks it: not ended, or failed under "hold". A job that is gone
 * (pruned) or ended otherwise blocks nothing.
 */
function planOf(
  jobs: NewJob[],
  sequences: readonly (SequenceItem | undefined)[],
  last: Map<string, number | null>,
  existing: Map<number, ExistingJob>,
  field: (i: number, name: string) => string,
): { plan: FlowPlan; tails: Map<string, number> } {
  const items: FlowItem[] = jobs.map(() => ({ local: [], existing: [], policy: "fail", dependent: false, referenced: false }));
  const tails = new Map<string, number>();
  sequences.forEach((s, i) => {
    if (!s) return;
    const item = items[i] as FlowItem;
    item.policy = s.onFailure === "hold" ? "hold" : "run";
    const previous = tails.get(s.key);
    if (previous !== undefined) {
      item.local.push(previous);
      (items[previous] as FlowItem).referenced = true;
    } else {
      const id = last.get(s.key) ?? null;
      const job = id === null ? undefined : existing.get(id);
      if (id !== null && job) {
        if (job.tenant !== (jobs[i] as NewJob).tenant) {
          throw new JobError(
            `${field(i, "sequence")}: the key ${JSON.stringify(s.key)} is used by jobs of another tenant (keys are shared by all tenants); include the tenant in the key`,
            field(i, "sequence"),
          );
        }
        if (BLOCKING.has(job.status) || (job.status === "failed" && s.onFailure === "hold")) item.existing.push(id);
      }
    }
    item.dependent = item.local.length + item.existing.length > 0;
    tails.set(s.key, i);
  });
  const existingIds = [...new Set(items.flatMap((item) => item.existing))];
  // Local edges always point back to an earlier item: input order is a topological order.
  return { plan: { items, order: items.map((_, i) => i), existingIds }, tails };
}

/** The items of one key in one call share a tenant, as a key's jobs across calls must. */
function checkTenants(jobs: NewJob[], sequences: readonly (SequenceItem | undefined)[], field: (i: number, name: string) => string): void {
  const tenants = new Map<string, string | null>();
  sequences.forEach((s, i) => {
    if (!s) return;
    const tenant = (jobs[i] as NewJob).tenant;
    if (tenants.has(s.key) && tenants.get(s.key) !== tenant) {
      throw new JobError(`${field(i, "sequence")}: items of one key must have one tenant; include the tenant in the key`, field(i, "sequence"));
    }
    tenants.set(s.key, tenant);
  });
}
