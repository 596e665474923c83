import type { JobsDatabase } from "../core/database.js";
import { liveCountsBy } from "../maintenance/counts.js";
import type { Executor } from "../db/executor.js";
import { wholeTokens, type LimitRule } from "./limit-rules.js";
import { forDialect, type PerDialect } from "../core/sql.js";

/**
 * What each concurrency key is doing now, for the operator's views (`listLimits`, status, the
 * dashboard, metrics). The claim decides with its own locked reads; these reads take no lock
 * and may be a moment behind it.
 */
export interface KeyUsage {
  key: string;
  /** Jobs of the key holding a lease (a worker's buffered, unstarted claims included). */
  running: number;
  /** Pending jobs of the key that are due now by the database clock. */
  ready: number;
  /** The key's bucket as stored; null when the key has no row yet (its bucket is full). */
  bucket: { tokens: number; elapsedSeconds: number } | null;
}

/** Seconds since the bucket was last refilled, by the database clock. */
const ELAPSED: PerDialect<(now: string) => string> = {
  postgres: (now) => `EXTRACT(EPOCH FROM (${now} - refilled_at))`,
  sqlite: (now) => `((${now}) - refilled_at) / 1000.0`,
  mysql: (now) => `TIMESTAMPDIFF(MICROSECOND, refilled_at, ${now}) / 1000000`,
};

interface CountRow {
  concurrency_key: string;
  running: number | string | null;
  ready: number | string | null;
}

interface BucketRow {
  concurrency_key: string;
  tokens: number | string;
  elapsed: number | string | null;
}

/** Every key with a pending or running job, and every key with a bucket row. */
export async function keyUsage(db: JobsDatabase, tx: Executor): Promise<KeyUsage[]> {
  const counts = await tx.query<CountRow>(liveCountsBy(db, "concurrency_key"));
  const buckets = await tx.query<BucketRow>(
    `SELECT concurrency_key, tokens, ${forDialect(ELAPSED, db.dialect, "key buckets")(db.sql.now)} AS elapsed FROM ${db.keysTable}`,
  );
  const byKey = new Map<string, KeyUsage>();
  const entry = (key: string): KeyUsage => {
    let usage = byKey.get(key);
    if (!usage) byKey.set(key, (usage = { key, running: 0, ready: 0, bucket: null }));
    return usage;
  };
  for (const row of counts.rows) {
    const usage = entry(row.concurrency_key);
    usage.running = Number(row.running ?? 0);
    usage.ready = Number(row.ready ?? 0);
  }
  for (const row of buckets.rows) {
    entry(row.concurrency_key).bucket = { tokens: Number(row.tokens), elapsedSeconds: Math.max(0, Number(row.elapsed ?? 0)) };
  }
  return [...byKey.values()];
}

/**
 * Whole tokens the key's bucket can give now (a claim may take one half a token early: EARLY_TOKEN): the stored tokens refilled at `limit / perSeconds` a
 * second since `refilled_at`, capped at `burst`. A key without a row has a full bucket.
 */
export function tokensNow(rule: LimitRule, bucket: KeyUsage["bucket"]): number {
  if (rule.rate === null) return Infinity;
  const { limit, perSeconds, burst } = rule.rate;
  if (bucket === null) return burst;
  return wholeTokens(Math.min(burst, bucket.tokens + (bucket.elapsedSeconds * limit) / perSeconds));
}

/**
 * The key's ready jobs that its rule holds back now: those beyond what could start at once,
 * which is the room under the concurrency limit (limit − running, never below 0) and the
 * whole tokens in the bucket, whichever is smaller. A key at its limit or with an empty
 * bucket has every ready job throttled; an unlimited key none.
 */
export function throttledNow(rule: LimitRule, usage: KeyUsage): number {
  const room = rule.concurrency === null ? Infinity : Math.max(0, rule.concurrency - usage.running);
  const startable = Math.min(room, tokensNow(rule, usage.bucket));
  return Math.max(0, usage.ready - Math.max(0, startable));
}
