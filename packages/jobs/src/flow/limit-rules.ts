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

/**
 * How much of a token a claim may take ahead of the bucket: a job may start when its key's
 * bucket holds `1 - EARLY_TOKEN` tokens, the rest owed (the bucket goes below zero and refills
 * the debt first). A claim takes a round trip or more; capped at the burst, a bucket waiting for
 * it to land would throw away what it refills meanwhile, and a burst of 1 would run measurably
 * below its rate. The long-run rate is unchanged; a start is at most this fraction of one
 * token's interval early.
 */
export const EARLY_TOKEN = 0.5;

/** Whole tokens a bucket holding `tokens` can give now (see EARLY_TOKEN). */
export function wholeTokens(tokens: number): number {
  return Math.floor(tokens + EARLY_TOKEN + 1e-9);
}

/** Milliseconds until a bucket holding `tokens` can give one, at `rate`. */
export function msUntilToken(tokens: number, rate: RateLimit): number {
  return (Math.max(0, 1 - EARLY_TOKEN - tokens) * rate.perSeconds * 1000) / rate.limit;
}
