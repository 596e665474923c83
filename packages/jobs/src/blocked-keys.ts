import type { JobsDatabase } from "./db/database.js";
import type { Executor } from "./db/executor.js";
import type { Blocked } from "./fair-sources.js";
import { toDate } from "./job-row.js";
import { LIMIT_COLUMNS, isPattern, ruleFor, toRule, type LimitRow, type LimitRule } from "./limit-rules.js";

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
}

export async function surveyKeys(db: JobsDatabase, tx: Executor): Promise<Survey> {
  const running = await tx.query<{ k: string; n: number | string }>(
    `SELECT concurrency_key AS k, count(*) AS n FROM ${db.table}
     WHERE status = 'running' AND status IN ('pending', 'running') AND concurrency_key <> '' GROUP BY concurrency_key`,
    [],
    "fair_running_keys",
  );
  const empty = await tx.query<{ k: string; tokens: number | string; refilled_at: unknown; now: unknown }>(
    `SELECT concurrency_key AS k, tokens, refilled_at, ${db.sql.now} AS now FROM ${db.keysTable} WHERE tokens < 1`,
    [],
    "fair_empty_buckets",
  );
  const keys = [...new Set([...running.rows.map((r) => String(r.k)), ...empty.rows.map((r) => String(r.k))])];
  const rules = await rulesFor(db, tx, keys);
  const blocked = new Set<string>();
  for (const r of running.rows) {
    const rule = ruleFor(String(r.k), rules);
    if (rule?.concurrency != null && Number(r.n) >= rule.concurrency) blocked.add(String(r.k));
  }
  let retryInMs: number | null = null;
  for (const r of empty.rows) {
    const rate = ruleFor(String(r.k), rules)?.rate;
    if (!rate) continue;
    const elapsed = Math.max(0, toDate(r.now).getTime() - toDate(r.refilled_at).getTime()) / 1000;
    const tokens = Math.min(rate.burst, Number(r.tokens) + (elapsed * rate.limit) / rate.perSeconds);
    if (tokens >= 1) continue;
    blocked.add(String(r.k));
    const ms = ((1 - tokens) * rate.perSeconds * 1000) / rate.limit;
    retryInMs = retryInMs === null ? ms : Math.min(retryInMs, ms);
  }
  // A limit of 0 pauses its key (or, as a pattern, every key it matches), running jobs or not.
  for (const rule of rules) if (rule.concurrency === 0 && !isPattern(rule.key)) blocked.add(rule.key);
  const prefixes = rules.filter((r) => r.concurrency === 0 && isPattern(r.key)).map((r) => r.key.slice(0, -1));
  return { blocked: { keys: [...blocked], prefixes }, rules, retryInMs };
}

/** The stored rules for these exact keys, every pattern, and every paused key. */
export async function rulesFor(db: JobsDatabase, tx: Executor, keys: readonly string[]): Promise<LimitRule[]> {
  const { rows } = await tx.query<LimitRow>(
    `SELECT ${LIMIT_COLUMNS} FROM ${db.limitsTable} WHERE ${keys.length > 0 ? `${db.sql.inList("limit_key", "$1")} OR ` : ""}limit_key LIKE '%*' OR concurrency = 0`,
    keys.length > 0 ? [db.dialect === "sqlite" ? JSON.stringify(keys) : keys] : [],
    keys.length > 0 ? "fair_rules" : "fair_patterns",
  );
  return rows.map(toRule);
}
