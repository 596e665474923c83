import type { JobsDatabase } from "../core/database.js";
import { pgCandidates, pgGroupsWalk } from "./fair-sources.js";

/**
 * The fair claim in one statement (PostgreSQL), for the common case: no limited key among the
 * candidates (no limit stored, or no candidate with a key). Nothing is locked but the rows it
 * takes, so fair share needs no transaction of its own: the pick of fair-share.ts written as one
 * sort. Each group's candidates come in claim order, so its k-th candidate's load is
 * (running + k) / weight, and the greedy pick — the head with the highest priority, then the
 * lightest load, then the group served longest ago (for its first candidate only, as `taken`
 * makes it), then the lowest id — takes exactly the first rows of that sort.
 * When a limit may apply, the statement takes nothing and says so: the caller runs the full
 * claim (fair-claim.ts), which locks the keys' rows and counts their running jobs under the lock.
 */
export interface OneStatementClaim<R> {
  /** The claimed rows, in fair-share order. */
  rows: R[];
  /** A limited key may be among the candidates: nothing was claimed, run the full claim. */
  limited: boolean;
  /** The candidates held jobs with a group or a key (as the full claim's `flow`). */
  flow: boolean;
}

/** `answer`: the columns read back, aliased `j` (the jobs table in the UPDATE). */
export async function claimInOneStatement<R extends object>(
  db: JobsDatabase,
  request: { queues: readonly string[]; limit: number; start: number; lease: number; workerId: string; served?: ReadonlyMap<string, number> },
  answer: string,
): Promise<OneStatementClaim<R>> {
  const served = [...(request.served ?? new Map<string, number>())];
  const { rows } = await db.executor.query<R & { fair_ord: number | null; fair_limited: boolean; fair_flow: boolean }>(
    `WITH RECURSIVE ${pgGroupsWalk(db)}, cand AS (
       ${pgCandidates(db, "id, priority, group_key AS g, concurrency_key AS k")}
     ), flags AS (
       SELECT EXISTS (SELECT 1 FROM cand WHERE k <> '') AND EXISTS (SELECT 1 FROM ${db.limitsTable}) AS limited,
              EXISTS (SELECT 1 FROM cand WHERE g <> '' OR k <> '') AS flow
     ), running AS (
       SELECT group_key AS g, count(*) AS n FROM ${db.table} WHERE status = 'running' AND queue = ANY($1) GROUP BY group_key
     ), ranked AS (
       SELECT c.id, c.priority, c.g, row_number() OVER (PARTITION BY c.g ORDER BY c.priority DESC, c.id) AS r FROM cand c
     ), picked AS (
       SELECT k.id, row_number() OVER (
                ORDER BY k.priority DESC, (COALESCE(n.n, 0) + k.r)::float8 / COALESCE(w.weight, 1),
                         CASE WHEN k.r = 1 THEN COALESCE(s.at, -1) ELSE 'Infinity'::float8 END, k.id) AS ord
       FROM ranked k
       LEFT JOIN running n ON n.g = k.g
       LEFT JOIN ${db.groupsTable} w ON w.group_key = k.g
       LEFT JOIN unnest($7::text[], $8::float8[]) AS s(g, at) ON s.g = k.g
       WHERE NOT (SELECT limited FROM flags)
       ORDER BY ord LIMIT $3
     ), claimed AS (
       UPDATE ${db.table} AS j
       SET status = 'running', claim_token = ${db.sql.newToken},
           attempts = j.attempts + CASE WHEN p.ord <= $4 THEN 1 ELSE 0 END,
           started_at = CASE WHEN p.ord <= $4 THEN now() END,
           locked_until = now() + make_interval(secs => $5), heartbeat_at = now(), locked_by = $6, updated_at = now()
       FROM picked p WHERE j.id = p.id
       RETURNING ${answer}, p.ord AS fair_ord
     )
     SELECT f.limited AS fair_limited, f.flow AS fair_flow, c.* FROM flags f LEFT JOIN claimed c ON true`,
    [request.queues, request.limit + 1, request.limit, request.start, request.lease, request.workerId, served.map(([g]) => g), served.map(([, at]) => at)],
    "fair_claim_one",
  );
  // One row per claimed job, or one row of flags alone when none was claimed.
  const flags = rows[0];
  const claimed = rows.filter((r) => r.fair_ord !== null).sort((a, b) => Number(a.fair_ord) - Number(b.fair_ord));
  return { rows: claimed, limited: flags?.fair_limited === true, flow: flags?.fair_flow === true };
}
