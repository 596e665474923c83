import type { JobsDatabase } from "./db/database.js";
import { pgCandidates, pgGroupsWalk } from "./fair-sources.js";

/**
 * The fair claim in one statement (PostgreSQL), concurrency limits included. Fair share is the
 * pick of fair-share.ts written as one sort: each group's candidates come in claim order, so its
 * k-th candidate's load is (running + k) / weight, and the greedy pick — the head with the
 * highest priority, then the lightest load, then the group served longest ago (for its first
 * candidate only, as `taken` makes it), then the lowest id — takes the first rows of that sort.
 * A limited key keeps the first of its candidates in that order, as many as its free slots (a
 * job held for the buffer only while its key keeps a slot besides, as fair-share.ts).
 *
 * A key's free slots are its limit minus its running jobs, and counting them needs its row of
 * jobs_keys locked first (key-locks.ts): under READ COMMITTED this statement counts from its
 * snapshot, taken before the lock. So every claim of a limited key, here or in fair-claim.ts,
 * writes its row (a new row version), and this statement compares the version it locked with
 * the version in its snapshot: the same, no claim of the key committed after the snapshot and
 * the count is exact (completions it missed only make it count high); different, the statement
 * takes nothing and the caller runs the claim that counts under the lock.
 *
 * It also takes nothing, and says so, when a candidate's key has a rate (the bucket arithmetic
 * lives in fair-claim.ts) or no row in jobs_keys yet (fair-claim.ts creates it).
 */
export interface OneStatementClaim<R> {
  /** The claimed rows, in fair-share order. */
  rows: R[];
  /** Nothing was claimed: run the claim that locks and counts (a rated key, a key without a row, or a key claimed meanwhile). */
  limited: boolean;
  /** The candidates held jobs with a group or a key (as the full claim's `flow`). */
  flow: boolean;
  /** Keys whose pending jobs the claim held back, at their concurrency limit. */
  throttled: string[];
}

/**
 * The rule that governs the key `k` (an SQL expression): its exact limit, else the longest
 * matching pattern (limit-rules.ts); a subquery of one row (concurrency, rate_limit) or none.
 */
function ruleOf(db: JobsDatabase, k: string): string {
  return `(SELECT concurrency, rate_limit FROM (
             SELECT concurrency, rate_limit, 2147483647 AS len FROM ${db.limitsTable} WHERE limit_key = ${k}
             UNION ALL
             SELECT concurrency, rate_limit, length(limit_key) FROM pats WHERE starts_with(${k}, prefix)
           ) r ORDER BY len DESC LIMIT 1)`;
}

/** `answer`: the columns read back, aliased `j` (the jobs table in the UPDATE). */
export async function claimInOneStatement<R extends object>(
  db: JobsDatabase,
  request: { queues: readonly string[]; limit: number; start: number; lease: number; workerId: string; served?: ReadonlyMap<string, number> },
  answer: string,
): Promise<OneStatementClaim<R>> {
  const served = [...(request.served ?? new Map<string, number>())];
  // The walk steps over keys known full (from the snapshot: only a shortcut, the budget below
  // decides) and keys paused by a pattern, so their backlog does not hide other keys' jobs.
  const without = ` AND concurrency_key <> ALL (ARRAY(SELECT k FROM blocked))
                    AND NOT EXISTS (SELECT 1 FROM pats p WHERE p.concurrency = 0 AND starts_with(concurrency_key, p.prefix))`;
  const { rows } = await db.executor.query<R & { fair_ord: number | null; fair_limited: boolean; fair_flow: boolean; fair_throttled: string[] }>(
    `WITH RECURSIVE ${pgGroupsWalk(db)}, pats AS MATERIALIZED (
       SELECT limit_key, left(limit_key, -1) AS prefix, concurrency, rate_limit FROM ${db.limitsTable} WHERE limit_key LIKE '%*'
     ), run_keys AS MATERIALIZED (
       SELECT concurrency_key AS k, count(*) AS n FROM ${db.table} WHERE status = 'running' AND concurrency_key <> '' GROUP BY concurrency_key
     ), blocked AS MATERIALIZED (
       SELECT r.k FROM run_keys r CROSS JOIN LATERAL ${ruleOf(db, "r.k")} l WHERE r.n >= l.concurrency
       UNION
       SELECT limit_key FROM ${db.limitsTable} WHERE concurrency = 0 AND limit_key NOT LIKE '%*'
     ), cand AS (
       ${pgCandidates(db, "id, priority, group_key AS g, concurrency_key AS k", without)}
     ), key_rule AS MATERIALIZED (
       SELECT x.k, l.concurrency, l.rate_limit FROM (SELECT DISTINCT k FROM cand WHERE k <> '') x CROSS JOIN LATERAL ${ruleOf(db, "x.k")} l
     ), flags AS (
       SELECT EXISTS (SELECT 1 FROM cand WHERE g <> '' OR k <> '') AS flow,
              EXISTS (SELECT 1 FROM key_rule WHERE rate_limit IS NOT NULL) AS rated
     ), locked AS (
       -- In key order (two claimers never deadlock); the row is written so that a claim counting
       -- from an older snapshot sees it changed.
       -- seen: the version locked (the newest); x: the version in this statement's snapshot.
       UPDATE ${db.keysTable} AS t SET tokens = t.tokens
       FROM (SELECT concurrency_key, xmin AS seen FROM ${db.keysTable}
             WHERE concurrency_key = ANY (ARRAY(SELECT k FROM key_rule WHERE concurrency IS NOT NULL)) AND NOT (SELECT rated FROM flags)
             ORDER BY concurrency_key FOR UPDATE) AS s
       WHERE t.concurrency_key = s.concurrency_key AND t.concurrency_key = ANY (ARRAY(SELECT k FROM key_rule WHERE concurrency IS NOT NULL))
       RETURNING t.concurrency_key AS k, s.seen, (SELECT xmin FROM ${db.keysTable} WHERE concurrency_key = t.concurrency_key) AS x
     ), state AS (
       SELECT f.flow,
              f.rated
              OR EXISTS (SELECT 1 FROM locked WHERE NOT (seen = x))
              OR (SELECT count(*) FROM locked) < (SELECT count(*) FROM key_rule WHERE concurrency IS NOT NULL) AS limited
       FROM flags f
     ), budget AS (
       SELECT r.k, r.concurrency - COALESCE(n.n, 0) AS slots FROM key_rule r LEFT JOIN run_keys n ON n.k = r.k WHERE r.concurrency IS NOT NULL
     ), running AS (
       SELECT group_key AS g, count(*) AS n FROM ${db.table} WHERE status = 'running' AND queue = ANY($1) GROUP BY group_key
     ), ranked AS (
       SELECT c.id, c.priority, c.g, c.k, row_number() OVER (PARTITION BY c.g ORDER BY c.priority DESC, c.id) AS r FROM cand c
     ), ordered AS (
       SELECT k.id, k.k, row_number() OVER (
                ORDER BY k.priority DESC, (COALESCE(n.n, 0) + k.r)::float8 / COALESCE(w.weight, 1),
                         CASE WHEN k.r = 1 THEN COALESCE(s.at, -1) ELSE 'Infinity'::float8 END, k.id) AS o
       FROM ranked k
       LEFT JOIN running n ON n.g = k.g
       LEFT JOIN ${db.groupsTable} w ON w.group_key = k.g
       LEFT JOIN unnest($7::text[], $8::float8[]) AS s(g, at) ON s.g = k.g
     ), fits AS (
       SELECT o.id, o.k, o.o, b.slots, row_number() OVER (PARTITION BY o.k ORDER BY o.o) AS kr FROM ordered o LEFT JOIN budget b ON b.k = o.k
     ), picked AS (
       SELECT id, slots, kr, row_number() OVER (ORDER BY o) AS ord FROM fits
       WHERE (slots IS NULL OR kr <= slots) AND NOT (SELECT limited FROM state)
       ORDER BY o LIMIT $3
     ), claimed AS (
       UPDATE ${db.table} AS j
       SET status = 'running', claim_token = ${db.sql.newToken},
           attempts = j.attempts + CASE WHEN p.ord <= $4 THEN 1 ELSE 0 END,
           started_at = CASE WHEN p.ord <= $4 THEN now() END,
           locked_until = now() + make_interval(secs => $5), heartbeat_at = now(), locked_by = $6, updated_at = now()
       FROM picked p WHERE j.id = p.id AND (p.ord <= $4 OR p.slots IS NULL OR p.kr < p.slots)
       RETURNING ${answer}, p.ord AS fair_ord
     ), throttled AS (
       SELECT b.k FROM blocked b
       WHERE EXISTS (SELECT 1 FROM ${db.table} WHERE concurrency_key = b.k AND status = 'pending' AND concurrency_key <> '' AND queue = ANY($1))
       UNION
       SELECT k FROM fits WHERE kr > slots
     )
     SELECT s.limited AS fair_limited, s.flow AS fair_flow, ARRAY(SELECT k FROM throttled) AS fair_throttled, c.*
     FROM state s LEFT JOIN claimed c ON true`,
    [request.queues, request.limit + 1, request.limit, request.start, request.lease, request.workerId, served.map(([g]) => g), served.map(([, at]) => at)],
    "fair_claim_one",
  );
  // One row per claimed job, or one row of flags alone when none was claimed.
  const flags = rows[0];
  const claimed = rows.filter((r) => r.fair_ord !== null).sort((a, b) => Number(a.fair_ord) - Number(b.fair_ord));
  const limited = flags?.fair_limited === true;
  return { rows: claimed, limited, flow: flags?.fair_flow === true, throttled: limited ? [] : (flags?.fair_throttled ?? []) };
}
