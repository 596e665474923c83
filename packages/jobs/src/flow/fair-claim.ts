import { randomUUID } from "node:crypto";
import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { fairShare, type Candidate } from "./fair-share.js";
import { MissingKeyRows, createKeyRows, lockKeys, type LockedKey } from "./key-locks.js";
import { rulesFor, surveyKeys, type Survey } from "./blocked-keys.js";
import { blockedWithWork, candidatesInQueues, candidatesOf, groupsOf, type GroupSource } from "./fair-sources.js";
import { msUntilToken, ruleFor, type LimitRule } from "./limit-rules.js";

/**
 * The claim of queues that hold jobs with a group or a concurrency key (the plain claim in
 * claim.ts takes the rest). One short transaction:
 *   1. the groups with pending jobs (a loose walk of jobs_flow_claim), and the keys known to be
 *      full or out of tokens (blocked-keys.ts: read from the few running jobs and empty buckets);
 *   2. each group's first ready jobs in claim order, stepping over blocked keys' jobs and rows
 *      other claimers hold (fair-sources.ts);
 *   3. the limited keys among them: each key's row of jobs_keys locked (in key order: two
 *      claimers never deadlock; claims of other keys never wait) and, under that lock, its
 *      running jobs counted and its token bucket refilled (key-locks.ts);
 *   4. fair-share.ts picks; the picked jobs are claimed and started at once, the buckets debited.
 * A key's slots are its running jobs themselves, not a counter: a slot is released only by the
 * write that ends its run (fenced by the claim token) or by the reclaim of its lease, so it can
 * neither leak nor be released twice.
 */
export interface FairClaimRequest {
  queues: readonly string[];
  /** Jobs wanted, started and held: the worker's free slots and the room of its buffer. */
  limit: number;
  /**
   * How many of them start now (the first in fair-share order); the rest are held. A job of a
   * limited key is held only while its key keeps a free slot besides, and never under a rate
   * (fair-share.ts).
   */
  start: number;
  lease: number;
  workerId: string;
  /** When this caller last served each group (see fair-share.ts). */
  served?: ReadonlyMap<string, number>;
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
  /** Limited keys were among the candidates: the one-statement claim (fair-claim-one.ts) would stand aside. */
  limited: boolean;
}

/** Whether jobs of group '' carry keys (then the queue still needs the fair claim). */
async function hasKeyed(db: JobsDatabase, tx: Executor, queues: readonly string[]): Promise<boolean> {
  const { rows } = await tx.query(
    db.dialect === "mysql"
      ? `SELECT 1 AS one FROM ${db.table} WHERE pending_key > '' AND ${db.sql.inList("queue", "$1")} LIMIT 1`
      : `SELECT 1 AS one FROM ${db.table} WHERE status = 'pending' AND concurrency_key <> '' AND ${db.sql.inList("queue", "$1")} LIMIT 1`,
    [queues],
    "fair_has_keyed",
  );
  return rows.length > 0;
}

async function groupLoad(
  db: JobsDatabase,
  tx: Executor,
  queues: readonly string[],
  groups: string[],
): Promise<{ running: Map<string, number>; weights: Map<string, number> }> {
  // One round trip: running jobs per group (w = 0), then the stored weights (w = 1).
  const { rows } = await tx.query<{ w: number | string; g: string; n: number | string }>(
    `SELECT 0 AS w, group_key AS g, count(*) AS n FROM ${db.table} WHERE status = 'running' AND ${db.sql.inList("queue", "$1")} GROUP BY group_key
     UNION ALL
     SELECT 1 AS w, group_key AS g, weight AS n FROM ${db.groupsTable} WHERE ${db.sql.inList("group_key", "$2")}`,
    [queues, groups],
    "fair_load",
  );
  const running = new Map<string, number>();
  const weights = new Map<string, number>();
  for (const r of rows) (Number(r.w) === 0 ? running : weights).set(String(r.g), Number(r.n));
  return { running, weights };
}

/**
 * Claims the chosen jobs; the first `start` start now (their attempt counted), the rest are held
 * unstarted, as the plain claim does (see start.ts); `answer` is the column list read back.
 */
async function claimChosen<R extends object>(
  db: JobsDatabase,
  tx: Executor,
  ids: number[],
  start: number,
  request: FairClaimRequest,
  answer: string,
): Promise<R[]> {
  const token = db.sql.newToken ?? db.sql.mariadb!.valueForId("$1", "$4");
  const starting = db.sql.newToken ? "$4" : "$5";
  const startsNow = `${db.sql.inList("id", starting)}`;
  const set = `status = 'running', claim_token = ${token},
               attempts = attempts + CASE WHEN ${startsNow} THEN 1 ELSE 0 END,
               started_at = CASE WHEN ${startsNow} THEN ${db.sql.now} END,
               locked_until = ${db.sql.nowPlus("$2")}, heartbeat_at = ${db.sql.now}, locked_by = $3, updated_at = ${db.sql.now}`;
  const startIds = start > 0 ? ids.slice(0, start) : [0];
  const params = [ids, request.lease, request.workerId, ...(db.sql.newToken ? [] : [ids.map(() => randomUUID())]), startIds];
  if (db.sql.returning) {
    return (await tx.query<R>(`UPDATE ${db.table} SET ${set} WHERE ${db.sql.inList("id", "$1")} RETURNING ${answer}`, params, "fair_claim")).rows;
  }
  await tx.query(`UPDATE ${db.table} SET ${set} WHERE ${db.sql.inList("id", "$1")}`, params);
  return (await tx.query<R>(`SELECT ${answer} FROM ${db.table} WHERE ${db.sql.inList("id", "$1")}`, [ids])).rows;
}

export async function fairClaim<R extends { id: unknown }>(db: JobsDatabase, request: FairClaimRequest, answer: string): Promise<FairClaimResult<R>> {
  if (request.limit <= 0) return { rows: [], flow: true, retryInMs: null, throttled: [], limited: false };
  // The retry may meet other keys' first claim (the candidates changed meanwhile): a few rounds.
  for (let round = 1; ; round++) {
    try {
      return await claimOnce<R>(db, request, answer);
    } catch (error) {
      if (!(error instanceof MissingKeyRows) || round >= MISSING_KEY_ROUNDS) throw error;
      await createKeyRows(db, error.rows);
    }
  }
}

/** Claims started over for limited keys met for the first time (each round creates their rows). */
const MISSING_KEY_ROUNDS = 5;

/** No key known to be held back (no limit stored, or no keyed job at the heads). */
const NO_SURVEY: Survey = { blocked: { keys: [], prefixes: [] }, rules: [], retryInMs: null, allExact: false };

type Found<R> = Omit<FairClaimResult<R>, "limited">;

function claimOnce<R extends { id: unknown }>(db: JobsDatabase, request: FairClaimRequest, answer: string): Promise<FairClaimResult<R>> {
  return db.executor.transaction(async (tx): Promise<FairClaimResult<R>> => {
    const none = (found: Found<R>): FairClaimResult<R> => ({ ...found, limited: false });
    let survey: Survey = NO_SURVEY;
    let candidates: Candidate[];
    let flow: boolean;
    let load: { running: Map<string, number>; weights: Map<string, number> } | null = null;
    let limitsStored = true;
    // One more per group than the claim takes: a job passed over for its key is how a claim
    // knows it held work back.
    if (db.dialect === "postgres") {
      const first = await candidatesInQueues(db, tx, request.queues, request.limit + 1, survey.blocked);
      ({ candidates } = first);
      load = first;
      limitsStored = first.limits;
      // Limits stored and keyed jobs at the heads: learn which keys are full or out of tokens,
      // and walk again past them if any is here (their backlog would hide other keys' jobs).
      if (first.limits && candidates.some((c) => c.key !== "")) {
        survey = await surveyKeys(db, tx);
        const heldKeys = new Set(survey.blocked.keys);
        if (survey.blocked.prefixes.length > 0 || candidates.some((c) => heldKeys.has(c.key))) {
          ({ candidates } = await candidatesInQueues(db, tx, request.queues, request.limit + 1, survey.blocked));
        }
      }
      flow = candidates.some((c) => c.group !== "" || c.key !== "") || (candidates.length === 0 && first.limits);
    } else {
      survey = await surveyKeys(db, tx);
      const sources: GroupSource[] = [];
      for (const queue of request.queues) sources.push(...(await groupsOf(db, tx, queue)));
      if (sources.length === 0) return none({ rows: [], flow: false, retryInMs: null, throttled: [] });
      flow = !(sources.length === request.queues.length && sources.every((s) => s.group === "")) || (await hasKeyed(db, tx, request.queues));
      candidates = await candidatesOf(db, tx, sources, request.limit + 1, survey.blocked);
    }
    let retryInMs = survey.retryInMs;
    const throttled = new Set(await blockedWithWork(db, tx, request.queues, survey.blocked.keys));
    if (candidates.length === 0) return none({ rows: [], flow, retryInMs, throttled: [...throttled] });
    const keys = [...new Set(candidates.map((c) => c.key).filter((k) => k !== ""))];
    const known = new Set(survey.rules.map((r) => r.key));
    const unknown = keys.filter((k) => !known.has(k));
    const rules = unknown.length > 0 && limitsStored && !survey.allExact ? [...survey.rules, ...(await rulesFor(db, tx, unknown))] : survey.rules;
    const limited = new Map<string, LimitRule>();
    for (const key of keys) {
      const rule = ruleFor(key, rules);
      if (rule && (rule.concurrency !== null || rule.rate !== null)) limited.set(key, rule);
    }
    const locked = await lockKeys(db, tx, limited);
    const waitForToken = (key: LockedKey, tokensLeft: number) => {
      const rate = key.rule.rate;
      if (!rate || key.budget.slots < 1) return;
      const ms = msUntilToken(tokensLeft, rate);
      retryInMs = retryInMs === null ? ms : Math.min(retryInMs, ms);
    };
    const groups = [...new Set(candidates.map((c) => c.group))];
    // One group: no share to weigh (fair-share.ts compares loads between groups only).
    const { running, weights } = load ?? (groups.length > 1 ? await groupLoad(db, tx, request.queues, groups) : { running: new Map(), weights: new Map() });
    const budgets = new Map([...locked].map(([key, l]) => [key, l.budget]));
    const limitedHere = locked.size > 0;
    const { chosen, outOfTokens, heldBack } = fairShare({
      candidates,
      running,
      weights,
      budgets,
      limit: request.limit,
      start: request.start,
      served: request.served,
    });
    const rows =
      chosen.length === 0
        ? []
        : await claimChosen<R>(
            db,
            tx,
            chosen.map((c) => c.id),
            request.start,
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
    return { rows, flow, retryInMs, throttled: [...throttled], limited: limitedHere };
  });
}
