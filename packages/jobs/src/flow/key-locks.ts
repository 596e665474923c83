import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import type { KeyBudget } from "./fair-share.js";
import { toDate } from "../core/job-row.js";
import { wholeTokens, type LimitRule } from "./limit-rules.js";

/**
 * The rows of jobs_keys: one per limited key in use. A fair claim locks the rows of the keys it
 * may claim (claims of one key take turns, claims of other keys never wait) and, under that
 * lock, counts each key's running jobs and refills its token bucket.
 */

/** One statement for `rows` keys: `values` is the list of `($n, $m)` pairs. */
const INSERT_KEYS: Record<JobsDatabase["dialect"], (table: string, values: string) => string> = {
  postgres: (t, values) => `INSERT INTO ${t} (concurrency_key, tokens) VALUES ${values} ON CONFLICT DO NOTHING`,
  sqlite: (t, values) => `INSERT OR IGNORE INTO ${t} (concurrency_key, tokens) VALUES ${values}`,
  mysql: (t, values) => `INSERT IGNORE INTO ${t} (concurrency_key, tokens) VALUES ${values}`,
};

/** Keys per INSERT: far below every backend's limit on parameters. */
const KEYS_PER_INSERT = 500;

/**
 * A limited key's first claim: its row does not exist yet. Created in a transaction of its own
 * (full bucket), then the claim starts over: created inside the claim, after other keys' rows
 * were locked, two claimers could each wait for the other's insert. Rows are never deleted.
 */
export class MissingKeyRows extends Error {
  constructor(readonly rows: { key: string; tokens: number }[]) {
    super("limited keys without a row");
  }
}

export async function createKeyRows(db: JobsDatabase, rows: { key: string; tokens: number }[]): Promise<void> {
  // In key order, as every claim locks them: two creators never wait on each other in a cycle.
  const sorted = [...rows].sort((a, b) => (a.key < b.key ? -1 : 1));
  await db.executor.transaction(async (tx) => {
    for (let i = 0; i < sorted.length; i += KEYS_PER_INSERT) {
      const chunk = sorted.slice(i, i + KEYS_PER_INSERT);
      const values = chunk.map((_, j) => `($${2 * j + 1}, $${2 * j + 2})`).join(", ");
      await tx.query(
        INSERT_KEYS[db.dialect](db.keysTable, values),
        chunk.flatMap((row) => [row.key, row.tokens]),
        "fair_key_rows",
      );
    }
  });
}

/**
 * The tokens a key without a rate is created with: a full bucket whatever rate it is given later
 * (refills are capped at the burst), and never one that the survey of empty buckets reads.
 */
const FULL = 1e9;

export interface LockedKey {
  rule: LimitRule;
  /** The database clock when the bucket was read: the refill counted up to it. */
  now: unknown;
  budget: KeyBudget;
  /** Tokens after refill (Infinity without a rate). */
  tokens: number;
}

/** Locks the limited keys' rows (creating them full), then counts their running jobs and refills their buckets. */
export async function lockKeys(db: JobsDatabase, tx: Executor, limited: Map<string, LimitRule>): Promise<Map<string, LockedKey>> {
  const keys = [...limited.keys()].sort();
  const locked = new Map<string, LockedKey>();
  if (keys.length === 0) return locked;
  const lock = async (some: string[]) =>
    (
      await tx.query<{ k: string; tokens: number | string; refilled_at: unknown; now: unknown }>(
        `SELECT concurrency_key AS k, tokens, ${db.sql.epochMs("refilled_at")} AS refilled_at, ${db.sql.epochMs(db.sql.now)} AS now FROM ${db.keysTable}
         WHERE ${db.sql.inList("concurrency_key", "$1")} ORDER BY concurrency_key${db.dialect === "sqlite" ? "" : " FOR UPDATE"}`,
        [some],
        "fair_lock",
      )
    ).rows;
  const rows = await lock(keys);
  const found = new Set(rows.map((r) => String(r.k)));
  const missing = keys.filter((key) => !found.has(key));
  if (missing.length > 0) throw new MissingKeyRows(missing.map((key) => ({ key, tokens: limited.get(key)?.rate?.burst ?? FULL })));
  // Counted after the lock: every claim of these keys that committed before is seen.
  const running = await tx.query<{ k: string; n: number | string }>(
    `SELECT concurrency_key AS k, count(*) AS n FROM ${db.table} WHERE status = 'running' AND concurrency_key <> '' AND ${db.sql.inList("concurrency_key", "$1")} GROUP BY concurrency_key`,
    [keys],
    "fair_running",
  );
  const runningOf = new Map(running.rows.map((r) => [String(r.k), Number(r.n)]));
  await clampFutureRefills(db, tx, rows);
  for (const row of rows) {
    const key = String(row.k);
    const rule = limited.get(key) as LimitRule;
    let tokens = Infinity;
    if (rule.rate) {
      const elapsed = Math.max(0, toDate(row.now).getTime() - toDate(row.refilled_at).getTime()) / 1000;
      tokens = Math.min(rule.rate.burst, Number(row.tokens) + (elapsed * rule.rate.limit) / rule.rate.perSeconds);
    }
    const slots = rule.concurrency === null ? Infinity : rule.concurrency - (runningOf.get(key) ?? 0);
    locked.set(key, { rule, now: row.now, tokens, budget: { slots, tokens: wholeTokens(tokens) } });
  }
  return locked;
}

/**
 * A refill time ahead of the clock (the clock stepped back, e.g. by NTP) counts no time until
 * the clock catches up, and a key out of tokens has no claim that would rewrite it: the key
 * would get no token for as long as the step. Brought back to now, under the lock, the bucket
 * refills from now on.
 */
async function clampFutureRefills(db: JobsDatabase, tx: Executor, rows: { k: string; refilled_at: unknown; now: unknown }[]): Promise<void> {
  const ahead = rows.filter((r) => toDate(r.refilled_at).getTime() > toDate(r.now).getTime());
  if (ahead.length === 0) return;
  // PostgreSQL's now() is still the instant the rows were read (the transaction's start).
  const at = db.dialect === "postgres" ? db.sql.now : "$2";
  await tx.query(
    `UPDATE ${db.keysTable} SET refilled_at = ${at} WHERE ${db.sql.inList("concurrency_key", "$1")}`,
    db.dialect === "postgres" ? [ahead.map((r) => String(r.k))] : [ahead.map((r) => String(r.k)), (ahead[0] as { now: unknown }).now],
  );
}
