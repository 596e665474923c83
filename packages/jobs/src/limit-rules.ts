/**
 * Limits as stored (`setLimit`) and which one applies to a key. A stored key is exact, or a
 * prefix pattern ending in `*` that gives each matching key its own limit of that size; an
 * exact key wins over patterns, the longest pattern over shorter ones.
 */

/** A token bucket: `limit` jobs per `perSeconds`, at most `burst` at once after a pause. */
export interface RateLimit {
  limit: number;
  perSeconds: number;
  burst: number;
}

/** One stored limit: at most `concurrency` jobs of the key hold a lease at once; `rate` paces their starts. */
export interface LimitRule {
  /** An exact key, or a prefix pattern ending in `*`. */
  key: string;
  concurrency: number | null;
  rate: RateLimit | null;
}

export function isPattern(key: string): boolean {
  return key.endsWith("*");
}

/** The rule that applies to `key` (exact, else the longest matching pattern), or null: unlimited. */
export function ruleFor(key: string, rules: readonly LimitRule[]): LimitRule | null {
  let best: LimitRule | null = null;
  for (const rule of rules) {
    if (rule.key === key) return rule;
    if (!isPattern(rule.key)) continue;
    const prefix = rule.key.slice(0, -1);
    if (key.startsWith(prefix) && (best === null || rule.key.length > best.key.length)) best = rule;
  }
  return best;
}

/** A limits-table row as any of the three drivers hands it back. */
export interface LimitRow {
  limit_key: string;
  concurrency: number | string | null;
  rate_limit: number | string | null;
  rate_per_seconds: number | string | null;
  rate_burst: number | string | null;
}

export function toRule(row: LimitRow): LimitRule {
  const num = (v: number | string | null) => (v === null ? null : Number(v));
  const limit = num(row.rate_limit);
  const perSeconds = num(row.rate_per_seconds);
  return {
    key: row.limit_key,
    concurrency: num(row.concurrency),
    rate: limit === null || perSeconds === null ? null : { limit, perSeconds, burst: num(row.rate_burst) ?? limit },
  };
}

/** The columns `toRule` reads, for SELECTs of the limits table. */
export const LIMIT_COLUMNS = "limit_key, concurrency, rate_limit, rate_per_seconds, rate_burst";
