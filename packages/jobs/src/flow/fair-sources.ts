import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import type { Candidate } from "./fair-share.js";

/**
 * Where a fair claim finds its candidates: the groups of a queue that have pending jobs, and the
 * first ready jobs of each, in claim order, minus the jobs of keys already known to be held back
 * (so a blocked key's backlog is stepped over by the index walk rather than read and dropped).
 */

/** Rows that hold a group or a key, as the partial index jobs_flow_claim states it. */
export const FLOW = "(group_key <> '' OR concurrency_key <> '')";
/** Rows with neither: the plain claim's (jobs_claim_plain). */
export const PLAIN = "group_key = '' AND concurrency_key = ''";

export interface GroupSource {
  queue: string;
  group: string;
}

/** The groups with pending jobs in `queue`; '' (jobs without a group) when it has any. */
export async function groupsOf(db: JobsDatabase, tx: Executor, queue: string): Promise<GroupSource[]> {
  const found = new Set<string>();
  if (db.dialect === "postgres") {
    // A recursive loose index scan: one index probe per group.
    const { rows } = await tx.query<{ g: string }>(
      `WITH RECURSIVE groups AS (
         (SELECT group_key FROM ${db.table} WHERE status = 'pending' AND queue = $1 AND ${FLOW} ORDER BY group_key LIMIT 1)
         UNION ALL
         SELECT n.group_key FROM groups p CROSS JOIN LATERAL (
           SELECT group_key FROM ${db.table} WHERE status = 'pending' AND queue = $1 AND ${FLOW} AND group_key > p.group_key ORDER BY group_key LIMIT 1) n
       )
       SELECT group_key AS g FROM groups
       UNION ALL
       SELECT '' WHERE EXISTS (SELECT 1 FROM ${db.table} WHERE status = 'pending' AND queue = $1 AND ${PLAIN} AND ${db.sql.due})`,
      [queue],
      "fair_groups",
    );
    for (const r of rows) found.add(String(r.g));
  } else {
    // No LATERAL: the same walk, one probe per statement. SQLite's index holds only jobs with a
    // group or a key (plain ones add group ''); MariaDB's holds every job, '' sorting first.
    const flow = db.dialect === "sqlite" ? ` AND ${FLOW}` : "";
    const start = db.dialect === "sqlite" ? `${PLAIN} AND ${db.sql.due}` : "group_key = ''";
    const any = await tx.query(`SELECT 1 AS one FROM ${db.table} WHERE status = 'pending' AND queue = $1 AND ${start} LIMIT 1`, [queue], "fair_group_none");
    if (any.rows.length > 0) found.add("");
    let after: string | null = db.dialect === "sqlite" ? null : "";
    for (;;) {
      const { rows } = await tx.query<{ g: string }>(
        `SELECT group_key AS g FROM ${db.table} WHERE status = 'pending' AND queue = $1${after === null ? "" : " AND group_key > $2"}${flow}
         ORDER BY group_key LIMIT 1`,
        after === null ? [queue] : [queue, after],
        after === null ? "fair_first_group" : "fair_next_group",
      );
      const next = rows[0];
      if (!next) break;
      after = String(next.g);
      found.add(after);
    }
  }
  return [...found].map((group) => ({ queue, group }));
}

/** Keys whose jobs no claim may take now: exact keys, and prefixes (patterns paused at 0). */
export interface Blocked {
  keys: readonly string[];
  prefixes: readonly string[];
}

interface CandidateRow {
  id: number | string;
  priority: number | string;
  g: string;
  k: string;
}

/** `AND` conditions leaving out blocked keys; their parameters are pushed onto `params` (numbered after those already there). */
function exclusions(db: JobsDatabase, blocked: Blocked, params: unknown[]): string {
  let sql = "";
  if (blocked.keys.length > 0) {
    params.push(blocked.keys);
    sql += ` AND NOT (${db.sql.inList("concurrency_key", `$${params.length}`)})`;
  }
  for (const prefix of blocked.prefixes) {
    params.push(prefix.length, prefix);
    sql += ` AND substr(concurrency_key, 1, $${params.length - 1}) <> $${params.length}`;
  }
  return sql;
}

/** Up to `limit` ready jobs of each group, in claim order, passing over rows other claimers hold. */
export async function candidatesOf(db: JobsDatabase, tx: Executor, sources: readonly GroupSource[], limit: number, blocked: Blocked): Promise<Candidate[]> {
  const skip = db.sql.skipLocked ? " FOR UPDATE SKIP LOCKED" : "";
  const ready = (where: string, limitParam: string) =>
    `SELECT id, priority, group_key AS g, concurrency_key AS k FROM ${db.table}
     WHERE status = 'pending' AND ${where} AND ${db.sql.due} AND run_at <= ${db.sql.now} ORDER BY ${db.sql.readyOrder} LIMIT ${limitParam}${skip}`;
  const rows: CandidateRow[] = [];
  if (db.dialect === "postgres") {
    const params: unknown[] = [sources.map((s) => s.queue), sources.map((s) => s.group), limit];
    const without = exclusions(db, blocked, params);
    // Jobs with a group or a key walk jobs_flow_claim; the plain ones of group '' walk jobs_claim_plain.
    const found = await tx.query<CandidateRow>(
      `SELECT c.* FROM unnest($1::text[], $2::text[]) AS s(q, g)
       CROSS JOIN LATERAL (${ready(`queue = s.q AND group_key = s.g AND ${FLOW}${without}`, "$3")}) c
       UNION ALL
       SELECT c.* FROM unnest($1::text[], $2::text[]) AS s(q, g)
       CROSS JOIN LATERAL (${ready(`queue = s.q AND s.g = '' AND ${PLAIN}`, "$3")}) c`,
      params,
      "fair_candidates",
    );
    rows.push(...found.rows);
  } else {
    for (const s of sources) {
      const params: unknown[] = [s.queue, s.group, limit];
      const without = exclusions(db, blocked, params);
      // SQLite: jobs with a group or a key are in jobs_flow_claim, plain ones in jobs_claim_plain;
      // MariaDB has one index for both (group_key first, then claim order).
      if (db.dialect === "sqlite") {
        rows.push(...(await tx.query<CandidateRow>(ready(`queue = $1 AND group_key = $2 AND ${FLOW}${without}`, "$3"), params, "fair_candidates")).rows);
        if (s.group === "") rows.push(...(await tx.query<CandidateRow>(ready(`queue = $1 AND ${PLAIN}`, "$2"), [s.queue, limit], "fair_plain")).rows);
      } else {
        rows.push(...(await tx.query<CandidateRow>(ready(`queue = $1 AND group_key = $2${without}`, "$3"), params, "fair_candidates")).rows);
      }
    }
  }
  return rows.map((r) => ({ id: Number(r.id), priority: Number(r.priority), group: String(r.g), key: String(r.k) }));
}

/** What the PostgreSQL statement reads besides the candidates. */
export interface QueueLoad {
  candidates: Candidate[];
  /** Running jobs per group in the queues. */
  running: Map<string, number>;
  /** Stored weights of the candidates' groups. */
  weights: Map<string, number>;
  /** Whether any limit is stored at all (if not, no key can be held back). */
  limits: boolean;
}

interface LoadRow {
  kind: string;
  id: number | string | null;
  priority: number | string | null;
  g: string;
  k: string;
  n: number | string | null;
}

/**
 * PostgreSQL, the CTE `groups (q, g)` of a `WITH RECURSIVE`: each queue's ($1, text[]) groups
 * with pending flow jobs, by a recursive loose index scan (one index probe per group).
 */
export function pgGroupsWalk(db: JobsDatabase): string {
  return `groups AS (
       SELECT q.name AS q, f.group_key AS g FROM unnest($1::text[]) AS q(name)
       CROSS JOIN LATERAL (SELECT group_key FROM ${db.table} WHERE status = 'pending' AND queue = q.name AND ${FLOW} ORDER BY group_key LIMIT 1) f
       UNION ALL
       SELECT p.q, n.group_key FROM groups p CROSS JOIN LATERAL (
         SELECT group_key FROM ${db.table} WHERE status = 'pending' AND queue = p.q AND ${FLOW} AND group_key > p.g ORDER BY group_key LIMIT 1) n
     )`;
}

/**
 * PostgreSQL, after `pgGroupsWalk`: the first $2 ready jobs of each group, then of each queue's
 * plain jobs, in claim order, locked, passing over rows another claimer holds. `columns` is the
 * select list; `without` (flow rows only) steps over blocked keys.
 */
export function pgCandidates(db: JobsDatabase, columns: string, without = ""): string {
  const ready = (where: string) =>
    `SELECT ${columns} FROM ${db.table}
     WHERE status = 'pending' AND ${where} AND due AND run_at <= now() ORDER BY priority DESC, id LIMIT $2 FOR UPDATE SKIP LOCKED`;
  return `SELECT c.* FROM groups s CROSS JOIN LATERAL (${ready(`queue = s.q AND group_key = s.g AND ${FLOW}${without}`)}) c
     UNION ALL
     SELECT c.* FROM unnest($1::text[]) AS s(q) CROSS JOIN LATERAL (${ready(`queue = s.q AND ${PLAIN}`)}) c`;
}

/**
 * PostgreSQL: one statement for the groups walk and the candidates (each queue's groups by a
 * recursive loose index scan, each group's first ready jobs by a LATERAL walk of its own, the
 * plain jobs of each queue), the running jobs per group, the groups' weights, and whether any
 * limit is stored — what most fair claims need, in one round trip. The running jobs are counted
 * only when a group other than '' has pending jobs: with one group there is no share to weigh,
 * and a worker's deep buffer of keyed jobs would be read on every claim.
 */
export async function candidatesInQueues(db: JobsDatabase, tx: Executor, queues: readonly string[], limit: number, blocked: Blocked): Promise<QueueLoad> {
  const params: unknown[] = [queues, limit];
  const without = exclusions(db, blocked, params);
  const { rows } = await tx.query<LoadRow>(
    `WITH RECURSIVE ${pgGroupsWalk(db)}
     ${pgCandidates(db, "'c'::text AS kind, id, priority, group_key AS g, concurrency_key AS k, NULL::bigint AS n", without)}
     UNION ALL
     SELECT 'r', NULL, NULL, group_key, '', count(*) FROM ${db.table} WHERE status = 'running' AND queue = ANY($1)
        AND EXISTS (SELECT 1 FROM groups WHERE g <> '') GROUP BY group_key
     UNION ALL
     SELECT 'w', NULL, NULL, w.group_key, '', w.weight FROM ${db.groupsTable} w WHERE w.group_key IN (SELECT g FROM groups)
     UNION ALL
     SELECT 'x', NULL, NULL, '', '', NULL WHERE EXISTS (SELECT 1 FROM ${db.limitsTable})`,
    params,
    "fair_queue_load",
  );
  const load: QueueLoad = { candidates: [], running: new Map(), weights: new Map(), limits: false };
  for (const r of rows) {
    if (r.kind === "c") load.candidates.push({ id: Number(r.id), priority: Number(r.priority), group: String(r.g), key: String(r.k) });
    else if (r.kind === "r") load.running.set(String(r.g), Number(r.n));
    else if (r.kind === "w") load.weights.set(String(r.g), Number(r.n));
    else load.limits = true;
  }
  return load;
}

/** Which of the blocked keys have pending jobs in these queues: what a claim reports as throttled. */
export async function blockedWithWork(db: JobsDatabase, tx: Executor, queues: readonly string[], keys: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  // One probe per key on jobs_key_pending; blocked keys are few (each has running jobs, or an empty bucket).
  for (const key of keys) {
    const { rows } = await tx.query(
      `SELECT 1 AS one FROM ${db.table} WHERE ${db.dialect === "mysql" ? "pending_key = $1" : "concurrency_key = $1 AND status = 'pending' AND concurrency_key <> ''"} AND ${db.sql.inList("queue", "$2")} LIMIT 1`,
      [key, queues],
      "fair_blocked_work",
    );
    if (rows.length > 0) found.push(key);
  }
  return found;
}
