import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { JobError } from "../base/errors.js";
import { keyUsage, throttledNow } from "./limit-usage.js";
import { isPattern, LIMIT_COLUMNS, ruleFor, toRule, type LimitRow, type RateLimit } from "./limit-rules.js";
import { type DatabaseOptions } from "../core/options.js";
import { DATABASE_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { forDialect, type PerDialect } from "../core/sql.js";
import { MAX_FLOW_KEY_LENGTH, checkInteger, checkLength, checkKnownOptions, checkName, describe } from "../base/validate.js";

export type { RateLimit } from "./limit-rules.js";

/** What `setLimit` takes: at least one of the two. An omitted one means no such limit. */
export interface LimitSettings {
  /** At most this many jobs of the key hold a lease at once (0 holds every job of the key back). */
  concurrency?: number;
  /** A token bucket: `limit` starts per `perSeconds`, at most `burst` (default `limit`) at once after a pause. */
  rate?: RateLimitSettings;
}

export interface RateLimitSettings {
  limit: number;
  perSeconds: number;
  burst?: number;
}

/** One stored limit as `listLimits` reads it, with what it does right now. */
export interface LimitStatus {
  /** An exact key, or a prefix pattern ending in `*`. */
  key: string;
  /** Per key (for a pattern, each matching key has its own); null: no concurrency limit. */
  concurrency: number | null;
  /** Null: no rate limit. */
  rate: RateLimit | null;
  /** Running jobs of the keys this limit governs (for a pattern: summed over them). */
  running: number;
  /** Ready jobs of those keys that the limit or the rate holds back now. */
  throttled: number;
}

const SETTING_KEYS = ["concurrency", "rate"] as const;
const RATE_KEYS = ["limit", "perSeconds", "burst"] as const;

/** A limit key: exact, or a prefix pattern whose only `*` is its last character. */
export function checkLimitKey(value: unknown, where: string): string {
  const key = checkFlowName(value, "key", where);
  const star = key.indexOf("*");
  if (star !== -1 && star !== key.length - 1) {
    throw new JobError(
      `${where}: key ${describe(key)} has a "*" before its end; a pattern is a prefix followed by one trailing "*" (e.g. "org:*"), an exact key has none`,
      "key",
    );
  }
  return key;
}

/** A non-empty key or group name that fits the column it is compared with (limit keys and group names equal a job's). */
export function checkFlowName(value: unknown, field: string, where: string): string {
  if (typeof value !== "string" || value.length === 0) throw new JobError(`${where}: ${field} must be a non-empty string, got ${describe(value)}`, field);
  checkLength(value, MAX_FLOW_KEY_LENGTH, field, where);
  return checkName(value, field);
}

interface CheckedLimit {
  concurrency: number | null;
  rate: RateLimit | null;
}

function checkSettings(value: unknown): CheckedLimit {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new JobError(
      `setLimit: the limit must be an object like { concurrency: 5 } or { rate: { limit: 14, perSeconds: 1 } }, got ${describe(value)}`,
      "limit",
    );
  }
  checkKnownOptions(value, SETTING_KEYS, "setLimit: limit");
  const { concurrency, rate } = value as LimitSettings;
  if (concurrency === undefined && rate === undefined) {
    throw new JobError("setLimit: give concurrency, rate or both (to lift every limit of a key, use removeLimit)", "limit");
  }
  return {
    concurrency: concurrency === undefined ? null : checkInteger(concurrency, "concurrency", 0),
    rate: rate === undefined ? null : checkRate(rate),
  };
}

function checkRate(value: unknown): RateLimit {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new JobError(`setLimit: rate must be an object { limit, perSeconds, burst? }, got ${describe(value)}`, "rate");
  }
  checkKnownOptions(value, RATE_KEYS, "setLimit: rate");
  const { limit, perSeconds, burst } = value as RateLimitSettings;
  const checkedLimit = checkInteger(limit, "rate.limit", 1);
  if (typeof perSeconds !== "number" || !Number.isFinite(perSeconds) || perSeconds <= 0) {
    throw new JobError(`rate.perSeconds must be a number of seconds > 0, got ${describe(perSeconds)}`, "rate.perSeconds");
  }
  return { limit: checkedLimit, perSeconds, burst: burst === undefined ? checkedLimit : checkInteger(burst, "rate.burst", 1) };
}

const UPSERT_LIMIT: PerDialect<(db: JobsDatabase) => string> = {
  postgres: (db) => upsert(db, "ON CONFLICT (limit_key) DO UPDATE SET", (c) => `${c} = EXCLUDED.${c}`),
  sqlite: (db) => upsert(db, "ON CONFLICT (limit_key) DO UPDATE SET", (c) => `${c} = excluded.${c}`),
  mysql: (db) => upsert(db, "ON DUPLICATE KEY UPDATE", (c) => `${c} = VALUES(${c})`),
};

function upsert(db: JobsDatabase, conflict: string, set: (column: string) => string): string {
  const replaced = ["concurrency", "rate_limit", "rate_per_seconds", "rate_burst", "updated_at"];
  return `INSERT INTO ${db.limitsTable} (limit_key, concurrency, rate_limit, rate_per_seconds, rate_burst, updated_at)
          VALUES ($1, $2, $3, $4, $5, ${db.sql.now}) ${conflict} ${replaced.map(set).join(", ")}`;
}

/**
 * Stores the limit of a key or key pattern, replacing the one it had: both settings are
 * replaced, so a setting left out means no such limit. Workers read it at their next claim.
 * Lowering a limit never stops running jobs; the key gets no new claim until it is under it.
 */
export async function setLimit(key: string, limit: LimitSettings, options: DatabaseOptions = {}): Promise<void> {
  checkOptions(options, DATABASE_OPTION_KEYS, "setLimit");
  const checkedKey = checkLimitKey(key, "setLimit");
  const { concurrency, rate } = checkSettings(limit);
  const db = resolveDb(options.db);
  await db.executor.query(forDialect(UPSERT_LIMIT, db.dialect, "setLimit")(db), [
    checkedKey,
    concurrency,
    rate?.limit ?? null,
    rate?.perSeconds ?? null,
    rate?.burst ?? null,
  ]);
}

/** Removes a key's (or pattern's) limit; true when there was one. Its jobs fall under the next rule that matches, if any. */
export async function removeLimit(key: string, options: DatabaseOptions = {}): Promise<boolean> {
  checkOptions(options, DATABASE_OPTION_KEYS, "removeLimit");
  const checkedKey = checkLimitKey(key, "removeLimit");
  const db = resolveDb(options.db);
  const { rowCount } = await db.executor.query(`DELETE FROM ${db.limitsTable} WHERE limit_key = $1`, [checkedKey]);
  return rowCount > 0;
}

/**
 * Every stored limit, ordered by key, with its running and throttled jobs now. Each key counts
 * under the one rule that governs it (exact, else the longest pattern), never under two.
 * Read in a read-only transaction.
 */
export async function listLimits(options: DatabaseOptions = {}): Promise<LimitStatus[]> {
  checkOptions(options, DATABASE_OPTION_KEYS, "listLimits");
  const db = resolveDb(options.db);
  return db.executor.transaction(
    async (tx) => {
      const rows = (await tx.query<LimitRow>(`SELECT ${LIMIT_COLUMNS} FROM ${db.limitsTable}`)).rows;
      const rules = rows.map(toRule).sort((a, b) => compareKeys(a.key, b.key));
      const byRule = new Map(rules.map((rule) => [rule.key, { ...rule, running: 0, throttled: 0 }]));
      if (rules.length === 0) return [];
      for (const usage of await keyUsage(db, tx)) {
        const rule = ruleFor(usage.key, rules);
        if (rule === null) continue;
        const entry = byRule.get(rule.key)!;
        entry.running += usage.running;
        entry.throttled += throttledNow(rule, usage);
      }
      return [...byRule.values()];
    },
    { readOnly: true },
  );
}

/** Code-unit order, the same on every backend whatever the database's collation. */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** For messages: how a limit reads (`5 at once, 14 per 1 s (burst 14)`). */
export function describeLimit(limit: { key: string; concurrency: number | null; rate: RateLimit | null }): string {
  const parts: string[] = [];
  const each = isPattern(limit.key) ? " per key" : "";
  if (limit.concurrency !== null) parts.push(`${limit.concurrency} at once${each}`);
  if (limit.rate !== null) parts.push(`${limit.rate.limit} per ${limit.rate.perSeconds} s${each} (burst ${limit.rate.burst})`);
  return parts.join(", ");
}
