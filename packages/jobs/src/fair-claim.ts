import { randomUUID } from "node:crypto";
import type { JobsDatabase } from "./db/database.js";
import type { Executor } from "./db/executor.js";
import { valueForId } from "./dialects/mysql.js";
import { fairShare, type Candidate } from "./fair-share.js";
import { MissingKeyRows, createKeyRows, lockKeys, type LockedKey } from "./key-locks.js";
import { LIMIT_COLUMNS, ruleFor, toRule, type LimitRow, type LimitRule } from "./limit-rules.js";

/**
 * The claim of queues that hold jobs with a group or a concurrency key (the plain claim in
 * claim.ts takes the rest). One short transaction:
 *   1. the (group, key) pairs with pending jobs, found by a loose walk of jobs_flow_claim;
 *   2. the limits of their keys; each limited key's row of jobs_keys is locked (in key order, so
 *      two claimers never deadlock) — claims of one key take turns, claims of other keys never
 *      wait — and, under that lock, its running jobs are counted and its token bucket refilled;
 *   3. each pair whose key has room: its first ready jobs, passing over rows other claimers hold;
 *   4. fair-share.ts picks among them; they are claimed and started at once, and the buckets
 *      debited.
 * A key's slots are its running jobs themselves, not a counter: a slot is released only by the
 * write that ends its run (fenced by the claim token) or by the reclaim of its lease, so it can
 * neither leak nor be released twice.
 */

export interface FairClaimRequest {
  queues: readonly string[];
  /** Jobs wanted: no more than the worker can start now (buffered jobs would hold slots idle). */
  limit: number;
  lease: number;
  workerId: string;
}

export interface FairClaimResult<R> {
  /** In the order fair share chose them. */
  rows: R[];
  /** Whether the queues hold jobs with a group or a key (else the claim found nothing plain either). */
  flow: boolean;
  /** When a job held back by an empty token bucket can next start, if any was. */
  retryInMs: number | null;
  /** Keys whose pending jobs this claim held back: at their concurrency limit or out of tokens. */
  throttled: string[];
}

/** Rows of the jobs table that hold a group or a key, as the partial index jobs_flow_claim states it. */
const FLOW = "(group_key <> '' OR concurrency_key <> '')";
const PLAIN = "group_key = '' AND concurrency_key = ''";

interface Pair {
  queue: string;
  group: string;
  key: string;
}

/** The (group, key) pairs of a queue's pending jobs, the plain pair ('', '') included when it has any. */
async function pairsOf(db: JobsDatabase, tx: Executor, queue: string): Promise<Pair[]> {
  const pairs: Pair[] = [];
  if (db.dialect === "postgres") {
    // One statement: a recursive loose index scan, one index probe per pair.
    const { rows } = await tx.query<{ g: string; k: string }>(
      `WITH RECURSIVE pairs AS (
         (SELECT group_key, concurrency_key FROM ${db.table} WHERE status = 'pending' AND queue = $1 AND ${FLOW}
          ORDER BY group_key, concurrency_key LIMIT 1)
         UNION ALL
         SELECT n.group_key, n.concurrency_key FROM pairs p CROSS JOIN LATERAL (
           SELECT group_key, concurrency_key FROM ${db.table}
           WHERE status = 'pending' AND queue = $1 AND ${FLOW} AND (group_key, concurrency_key) > (p.group_key, p.concurrency_key)
           ORDER BY group_key, concurrency_key LIMIT 1) n
       )
       SELECT group_key AS g, concurrency_key AS k FROM pairs
       UNION ALL
       SELECT '', '' WHERE EXISTS (SELECT 1 FROM ${db.table} WHERE status = 'pending' AND queue = $1 AND ${PLAIN})`,
      [queue],
      "fair_pairs",
    );
    return rows.map((r) => ({ queue, group: r.g, key: r.k }));
  }
  // SQLite and MariaDB have no LATERAL: the same walk, one probe per statement. The next pair is
  // the next key of the same group or the first of the next group, each an index range of its
  // own: written as one OR, both databases scanned every job of the current group.
  const pick = `SELECT group_key AS g, concurrency_key AS k FROM ${db.table} WHERE status = 'pending' AND queue = $1 AND ${FLOW}`;
  let after = { g: "", k: "" };
  for (;;) {
    const { rows } = await tx.query<{ g: string; k: string }>(
      `SELECT g, k FROM (
         SELECT * FROM (${pick} AND group_key = $2 AND concurrency_key > $3 ORDER BY concurrency_key LIMIT 1) same
         UNION ALL
         SELECT * FROM (${pick} AND group_key > $2 ORDER BY group_key, concurrency_key LIMIT 1) later
       ) next ORDER BY g, k LIMIT 1`,
      [queue, after.g, after.k],
      "fair_next_pair",
    );
    const next = rows[0];
    if (!next) break;
    pairs.push({ queue, group: String(next.g), key: String(next.k) });
    after = { g: String(next.g), k: String(next.k) };
  }
  const plain = await tx.query(`SELECT 1 AS one FROM ${db.table} WHERE status = 'pending' AND queue = $1 AND ${PLAIN} LIMIT 1`, [queue], "fair_plain");
  if (plain.rows.length > 0) pairs.push({ queue, group: "", key: "" });
  return pairs;
}

async function rulesFor(db: JobsDatabase, tx: Executor, keys: string[]): Promise<LimitRule[]> {
  if (keys.length === 0) return [];
  const { rows } = await tx.query<LimitRow>(
    `SELECT ${LIMIT_COLUMNS} FROM ${db.limitsTable} WHERE ${db.sql.inList("limit_key", "$1")} OR limit_key LIKE '%*'`,
    [db.dialect === "sqlite" ? JSON.stringify(keys) : keys],
    "fair_rules",
  );
  return rows.map(toRule);
}

interface CandidateRow {
  id: number | string;
  priority: number | string;
  g: string;
  k: string;
}

/** Up to `limit` ready jobs of each pair, in claim order, passing over rows other claimers hold. */
async function candidatesOf(db: JobsDatabase, tx: Executor, pairs: (Pair & { limit: number })[]): Promise<Candidate[]> {
  const skip = db.sql.skipLocked ? " FOR UPDATE SKIP LOCKED" : "";
  const ready = (where: string, limit: string) =>
    `SELECT id, priority, group_key AS g, concurrency_key AS k FROM ${db.table}
     WHERE status = 'pending' AND ${where} AND run_at <= ${db.sql.now} ORDER BY ${db.sql.readyOrder} LIMIT ${limit}${skip}`;
  const rows: CandidateRow[] = [];
  const flow = pairs.filter((p) => p.group !== "" || p.key !== "");
  const plain = pairs.filter((p) => p.group === "" && p.key === "");
  if (db.dialect === "postgres" && flow.length > 0) {
    const found = await tx.query<CandidateRow>(
      `SELECT c.* FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) AS p(q, g, k, n)
       CROSS JOIN LATERAL (${ready(`queue = p.q AND group_key = p.g AND concurrency_key = p.k AND ${FLOW}`, "p.n")}) c`,
      [flow.map((p) => p.queue), flow.map((p) => p.group), flow.map((p) => p.key), flow.map((p) => p.limit)],
      "fair_candidates",
    );
    rows.push(...found.rows);
  } else {
    for (const p of flow)
      rows.push(
        ...(await tx.query<CandidateRow>(ready(`queue = $1 AND group_key = $2 AND concurrency_key = $3 AND ${FLOW}`, "$4"), [p.queue, p.group, p.key, p.limit]))
          .rows,
      );
  }
  for (const p of plain) rows.push(...(await tx.query<CandidateRow>(ready(`queue = $1 AND ${PLAIN}`, "$2"), [p.queue, p.limit], "fair_plain_candidates")).rows);
  return rows.map((r) => ({ id: Number(r.id), priority: Number(r.priority), group: String(r.g), key: String(r.k) }));
}

async function groupLoad(
  db: JobsDatabase,
  tx: Executor,
  queues: readonly string[],
  groups: string[],
): Promise<{ running: Map<string, number>; weights: Map<string, number> }> {
  const list = (values: readonly string[]) => (db.dialect === "sqlite" ? JSON.stringify(values) : values);
  // One round trip: running jobs per group (w = 0), then the stored weights (w = 1).
  const { rows } = await tx.query<{ w: number | string; g: string; n: number | string }>(
    `SELECT 0 AS w, group_key AS g, count(*) AS n FROM ${db.table} WHERE status = 'running' AND ${db.sql.inList("queue", "$1")} GROUP BY group_key
     UNION ALL
     SELECT 1 AS w, group_key AS g, weight AS n FROM ${db.groupsTable} WHERE ${db.sql.inList("group_key", "$2")}`,
    [list(queues), list(groups)],
    "fair_load",
  );
  const running = new Map<string, number>();
  const weights = new Map<string, number>();
  for (const r of rows) (Number(r.w) === 0 ? running : weights).set(String(r.g), Number(r.n));
  return { running, weights };
}

/** Claims the chosen jobs, all started now; `answer` is the column list read back. */
async function claimChosen<R extends object>(db: JobsDatabase, tx: Executor, ids: number[], request: FairClaimRequest, answer: string): Promise<R[]> {
  const list = db.dialect === "sqlite" ? JSON.stringify(ids) : ids;
  const token = db.sql.newToken ?? valueForId("$1", "$4");
  const set = `status = 'running', claim_token = ${token}, attempts = attempts + 1, started_at = ${db.sql.now},
               locked_until = ${db.sql.nowPlus("$2")}, heartbeat_at = ${db.sql.now}, locked_by = $3, updated_at = ${db.sql.now}`;
  const params = [list, request.lease, request.workerId, ...(db.sql.newToken ? [] : [ids.map(() => randomUUID())])];
  if (db.sql.returning) {
    return (await tx.query<R>(`UPDATE ${db.table} SET ${set} WHERE ${db.sql.inList("id", "$1")} RETURNING ${answer}`, params, "fair_claim")).rows;
  }
  await tx.query(`UPDATE ${db.table} SET ${set} WHERE ${db.sql.inList("id", "$1")}`, params);
  return (await tx.query<R>(`SELECT ${answer} FROM ${db.table} WHERE ${db.sql.inList("id", "$1")}`, [list])).rows;
}

export async function fairClaim<R extends { id: unknown }>(db: JobsDatabase, request: FairClaimRequest, answer: string): Promise<FairClaimResult<R>> {
  if (request.limit <= 0) return { rows: [], flow: true, retryInMs: null, throttled: [] };
  try {
    return await claimOnce<R>(db, request, answer);
  } catch (error) {
    if (!(error instanceof MissingKeyRows)) throw error;
    await createKeyRows(db, error.rows);
    return claimOnce<R>(db, request, answer);
  }
}

function claimOnce<R extends { id: unknown }>(db: JobsDatabase, request: FairClaimRequest, answer: string): Promise<FairClaimResult<R>> {
  return db.executor.transaction(async (tx) => {
    const pairs: Pair[] = [];
    for (const queue of request.queues) pairs.push(...(await pairsOf(db, tx, queue)));
    const flow = pairs.some((p) => p.group !== "" || p.key !== "");
    if (pairs.length === 0) return { rows: [], flow, retryInMs: null, throttled: [] };
    const keys = [...new Set(pairs.map((p) => p.key).filter((k) => k !== ""))];
    const rules = await rulesFor(db, tx, keys);
    const limited = new Map<string, LimitRule>();
    for (const key of keys) {
      const rule = ruleFor(key, rules);
      if (rule && (rule.concurrency !== null || rule.rate !== null)) limited.set(key, rule);
    }
    const locked = await lockKeys(db, tx, limited);
    let retryInMs: number | null = null;
    const waitForToken = (key: LockedKey, tokensLeft: number) => {
      const rate = key.rule.rate;
      if (!rate || key.budget.slots < 1) return;
      const ms = (Math.max(0, 1 - tokensLeft) * rate.perSeconds * 1000) / rate.limit;
      retryInMs = retryInMs === null ? ms : Math.min(retryInMs, ms);
    };
    const throttled = new Set<string>();
    const open: (Pair & { limit: number })[] = [];
    for (const pair of pairs) {
      const key = locked.get(pair.key);
      const room = key ? Math.min(key.budget.slots, key.budget.tokens) : Infinity;
      // One more than the key has room for: passing it over is how the claim knows it held jobs back.
      if (room >= 1) open.push({ ...pair, limit: Math.min(request.limit, room + (key ? 1 : 0)) });
      else if (key) {
        throttled.add(pair.key);
        waitForToken(key, key.tokens);
      }
    }
    const candidates = await candidatesOf(db, tx, open);
    if (candidates.length === 0) return { rows: [], flow, retryInMs, throttled: [...throttled] };
    const groups = [...new Set(candidates.map((c) => c.group))];
    const { running, weights } = await groupLoad(db, tx, request.queues, groups);
    const budgets = new Map([...locked].map(([key, l]) => [key, l.budget]));
    const { chosen, outOfTokens, heldBack } = fairShare({ candidates, running, weights, budgets, limit: request.limit });
    const rows =
      chosen.length === 0
        ? []
        : await claimChosen<R>(
            db,
            tx,
            chosen.map((c) => c.id),
            request,
            answer,
          );
    const order = new Map(chosen.map((c, i) => [c.id, i]));
    rows.sort((a, b) => (order.get(Number(a.id)) ?? 0) - (order.get(Number(b.id)) ?? 0));
    const takenPerKey = new Map<string, number>();
    for (const c of chosen) if (locked.get(c.key)?.rule.rate) takenPerKey.set(c.key, (takenPerKey.get(c.key) ?? 0) + 1);
    for (const [key, taken] of takenPerKey) {
      const l = locked.get(key) as LockedKey;
      // Refilled up to the instant it was read: PostgreSQL's now() is still that instant (the
      // transaction's start); elsewhere the clock moved on, and the tokens of that gap would be lost.
      const at = db.dialect === "postgres" ? db.sql.now : "$3";
      await tx.query(
        `UPDATE ${db.keysTable} SET tokens = $1, refilled_at = ${at} WHERE concurrency_key = $2`,
        db.dialect === "postgres" ? [l.tokens - taken, key] : [l.tokens - taken, key, l.now],
        "fair_bucket",
      );
    }
    for (const key of outOfTokens) {
      const l = locked.get(key) as LockedKey;
      waitForToken(l, l.tokens - (takenPerKey.get(key) ?? 0));
    }
    for (const key of heldBack) throttled.add(key);
    return { rows, flow, retryInMs, throttled: [...throttled] };
  });
}
