import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import type { Blocked } from "./fair-sources.js";
import { toDate } from "../core/job-row.js";
import { LIMIT_COLUMNS, isPattern, msUntilToken, ruleFor, toRule, wholeTokens, type LimitRow, type LimitRule } from "./limit-rules.js";

/**
 * Before a fair claim reads candidates: which keys are known to be full or out of tokens, read
 * without locks. They are only left out of the candidate walk (a blocked key's backlog is
 * stepped over, not read); whether a key has room is decided under its lock (key-locks.ts).
 * Every key that can be full has running jobs, and every key out of tokens has a row with
 * fewer than one token: both sets are small whatever the number of keys in use.
 */

export interface Survey {
  blocked: Blocked;
  /** The rules read so far (patterns, and exact keys met), for the candidates' keys. */
  rules: LimitRule[];
  /** When a blocked key's bucket next holds a token, if any is out of tokens. */
  retryInMs: number | null;
  /** `rules` holds every exact rule stored: no candidate's key has a rule left to read. */
  allExact: boolean;
}

/** A NULL of a column's type: PostgreSQL types a UNION's columns from its first SELECT. */
function nul(db: JobsDatabase, pgType: string): string {
  return db.dialect === "postgres" ? `NULL::${pgType}` : "NULL";
}

interface SurveyRow {
  kind: string;
  k: string;
  n: number | string | null;
  at: unknown;
  now: unknown;
  c: number | string | null;
  rl: number | string | null;
  rp: number | string | null;
  rb: number | string | null;
}

export async function surveyKeys(db: JobsDatabase, tx: Executor): Promise<Survey> {
  // One round trip: running jobs per key (r), buckets under one token (e), the rules that can
  // apply to them or pause keys (l): patterns, paused keys, and exact rules of those keys, and
  // how many exact rules are stored (x): when those are all, the claim reads no more rules.
  // Only keys with as many running jobs as the lowest limit can be full: a worker's deep
  // buffer of keys far from their limits is not sent back on every claim.
  const running = `SELECT concurrency_key FROM ${db.table} WHERE status = 'running' AND concurrency_key <> ''`;
  const empty = `SELECT concurrency_key FROM ${db.keysTable} WHERE tokens < 1`;
  const { rows } = await tx.query<SurveyRow>(
    `SELECT 'r' AS kind, concurrency_key AS k, count(*) AS n, ${nul(db, "timestamptz")} AS at, ${db.sql.now} AS now,
            ${nul(db, "integer")} AS c, ${nul(db, "integer")} AS rl, ${nul(db, "float8")} AS rp, ${nul(db, "integer")} AS rb
       FROM ${db.table} WHERE status = 'running' AND concurrency_key <> '' GROUP BY concurrency_key
      HAVING count(*) >= (SELECT min(concurrency) FROM ${db.limitsTable} WHERE concurrency > 0)
     UNION ALL
     SELECT 'e', concurrency_key, tokens, refilled_at, ${db.sql.now}, NULL, NULL, NULL, NULL FROM ${db.keysTable} WHERE tokens < 1
     UNION ALL
     SELECT 'l', limit_key, NULL, NULL, ${db.sql.now}, concurrency, rate_limit, rate_per_seconds, rate_burst FROM ${db.limitsTable}
      WHERE limit_key LIKE '%*' OR concurrency = 0 OR limit_key IN (${running}) OR limit_key IN (${empty})
     UNION ALL
     SELECT 'x', '', count(*), NULL, ${db.sql.now}, NULL, NULL, NULL, NULL FROM ${db.limitsTable} WHERE limit_key NOT LIKE '%*'`,
    [],
    "fair_survey",
  );
  const exactStored = Number(rows.find((r) => r.kind === "x")?.n ?? -1);
  const rules = rows
    .filter((r) => r.kind === "l")
    .map((r) => toRule({ limit_key: String(r.k), concurrency: r.c, rate_limit: r.rl, rate_per_seconds: r.rp, rate_burst: r.rb }));
  const blocked = new Set<string>();
  let retryInMs: number | null = null;
  for (const r of rows) {
    if (r.kind === "r") {
      const rule = ruleFor(String(r.k), rules);
      if (rule?.concurrency != null && Number(r.n) >= rule.concurrency) blocked.add(String(r.k));
    } else if (r.kind === "e") {
      const rate = ruleFor(String(r.k), rules)?.rate;
      if (!rate) continue;
      // Refilled "in the future" (the clock stepped back): left to the claim, which brings it back to now under its lock.
      if (toDate(r.at).getTime() > toDate(r.now).getTime()) continue;
      const elapsed = Math.max(0, toDate(r.now).getTime() - toDate(r.at).getTime()) / 1000;
      const tokens = Math.min(rate.burst, Number(r.n) + (elapsed * rate.limit) / rate.perSeconds);
      if (wholeTokens(tokens) >= 1) continue;
      blocked.add(String(r.k));
      const ms = msUntilToken(tokens, rate);
      retryInMs = retryInMs === null ? ms : Math.min(retryInMs, ms);
    }
  }
  // A limit of 0 pauses its key (or, as a pattern, every key it matches), running jobs or not.
  for (const rule of rules) if (rule.concurrency === 0 && !isPattern(rule.key)) blocked.add(rule.key);
  const prefixes = rules.filter((r) => r.concurrency === 0 && isPattern(r.key)).map((r) => r.key.slice(0, -1));
  const allExact = rules.filter((r) => !isPattern(r.key)).length === exactStored;
  return { blocked: { keys: [...blocked], prefixes }, rules, retryInMs, allExact };
}

/** The stored rules for these exact keys, every pattern, and every paused key. */
export async function rulesFor(db: JobsDatabase, tx: Executor, keys: readonly string[]): Promise<LimitRule[]> {
  const { rows } = await tx.query<LimitRow>(
    `SELECT ${LIMIT_COLUMNS} FROM ${db.limitsTable} WHERE ${keys.length > 0 ? `${db.sql.inList("limit_key", "$1")} OR ` : ""}limit_key LIKE '%*' OR concurrency = 0`,
    keys.length > 0 ? [keys] : [],
    keys.length > 0 ? "fair_rules" : "fair_patterns",
  );
  return rows.map(toRule);
}
