import type { JobsDatabase } from "../core/database.js";
import { randomUUID } from "node:crypto";
import { lockUpdateRead } from "../core/lock-update-read.js";
import { promoteDue } from "./due.js";
import { fairClaim } from "../flow/fair-claim.js";
import { claimInOneStatement } from "../flow/fair-claim-one.js";
import { columnList } from "../core/job-row.js";
import { CLAIMED, toClaimed, type ClaimRow, type ClaimedJob } from "./claimed.js";
import { forDialect, runSql, type PerDialect, type Script } from "../core/sql.js";

export type { ClaimedJob } from "./claimed.js";

export interface ClaimRequest {
  queues: readonly string[];
  limit: number;
  /** Seconds the lease lasts from the database's now. */
  lease: number;
  workerId: string;
  /**
   * How many of the claimed jobs (the first, in claim order) start now: their attempt is
   * counted by the claim. The rest are held unstarted until `sendStarts` (see start.ts).
   */
  start: number;
  /**
   * The caller's last claim of these queues was fair: go straight to the fair claim (which
   * serves plain jobs too), without the plain claim's round trip that would stand aside anyway.
   */
  fair?: boolean;
  /** When this caller last served each group ('' for jobs without one): the fair claim's turn-taking between equally loaded groups. */
  served?: ReadonlyMap<string, number>;
  /**
   * "always": promote the scheduled jobs whose time has come before this claim (processOne and
   * drain, one claim each, whose caller expects a job due now to be taken). By default a claim
   * promotes at most every PROMOTE_EVERY_MS per database (due.ts): a worker claims many times a second.
   */
  promote?: "always" | "throttled";
  /**
   * The caller's last fair claim met limited keys: skip the one-statement claim (it would stand
   * aside) and go straight to the claim that locks their rows.
   */
  limited?: boolean;
}

/** A dialect's claim statement, and its first parameter: the queues as that statement reads them. */
interface ClaimStatement {
  sql: string | Script<ClaimRow>;
  queues: unknown;
}

/**
 * True while none of the claim's queues holds a pending job with a group or a concurrency key:
 * then the plain claim serves them in plain order; otherwise it takes nothing and the fair claim
 * (fair-claim.ts) serves them all. The probe reads the partial index jobs_flow_claim, empty when
 * flow control is unused.
 */
function noFlowIn(db: JobsDatabase, queues: string): string {
  if (db.dialect !== "mysql")
    return `NOT EXISTS (SELECT 1 FROM ${db.table} WHERE status = 'pending' AND ${queues} AND (group_key <> '' OR concurrency_key <> ''))`;
  // No partial index: a range of jobs_flow_claim past group '' for groups, jobs_key_pending for keys.
  return `NOT EXISTS (SELECT 1 FROM ${db.table} WHERE status = 'pending' AND ${queues} AND group_key > '')
          AND NOT EXISTS (SELECT 1 FROM ${db.table} WHERE pending_key > '' AND ${queues})`;
}

/**
 * One queue's ready jobs in claim order, at most `limit`: the index walk every claim is made
 * of, locked where the database can skip rows other claimers hold.
 */
function readyInQueue(db: JobsDatabase, queue: string, limit: string, noFlow: string): string {
  return `SELECT id, priority FROM ${db.table}
        WHERE status = 'pending' AND queue = ${queue} AND group_key = '' AND concurrency_key = '' AND ${db.sql.due} AND run_at <= ${db.sql.now} AND ${noFlow}
        ORDER BY ${db.sql.readyOrder}
        LIMIT ${limit}${db.sql.skipLocked ? " FOR UPDATE SKIP LOCKED" : ""}`;
}

const CLAIM: PerDialect<(db: JobsDatabase, queues: readonly string[]) => ClaimStatement> = {
  // SKIP LOCKED: concurrent claimers pass over each other's rows instead of waiting on them.
  // One index walk per queue (LATERAL): `queue = ANY($1)` would lose the index order and sort
  // every pending row of the backlog on each claim; this stops after LIMIT rows per queue.
  // Timestamps come back as epoch milliseconds (the fair claims' too): pg's text-timestamp
  // parser (a regex and a Date per column) cost more per claimed job than the rest of the row.
  // The UPDATE finds the picked rows by `id = ANY(ARRAY(…))`, an index scan of the primary
  // key: joined `FROM picked`, the planner hash-joined a sequential scan of the whole table
  // whenever it was small enough to look cheap, most of the claim's time (bench/BENCHMARKS.md).
  // One queue (most workers): the walk alone, without unnest, LATERAL and the merge sort — a
  // simpler plan to make and run on every wake-up. $1 is then the queue name, not an array.
  postgres: (db, queues) => ({
    queues: queues.length === 1 ? queues[0] : queues,
    sql: `
    WITH picked AS (${
      queues.length === 1
        ? readyInQueue(db, "$1", "$2", noFlowIn(db, "queue = $1"))
        : `
      SELECT p.id, p.priority FROM unnest($1::text[]) AS q(name)
      CROSS JOIN LATERAL (${readyInQueue(db, "q.name", "$2", noFlowIn(db, "queue = ANY($1)"))}) AS p
      ORDER BY p.priority DESC, p.id
      LIMIT $2`
    }
    ), starting AS (
      SELECT id FROM picked ORDER BY priority DESC, id LIMIT $5
    )
    UPDATE ${db.table} AS j
    SET status = 'running', claim_token = ${db.sql.newToken},
        attempts = CASE WHEN j.id = ANY(ARRAY(SELECT id FROM starting)) THEN j.attempts + 1 ELSE j.attempts END,
        started_at = CASE WHEN j.id = ANY(ARRAY(SELECT id FROM starting)) THEN now() END,
        locked_until = now() + make_interval(secs => $3), heartbeat_at = now(), locked_by = $4, updated_at = now()
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING ${columnList(db.sql, CLAIMED, { alias: "j", epochTimestamps: true })}`,
  }),
  // SQLite has a single writer: BEGIN IMMEDIATE takes the write lock before the claim reads,
  // so two claimers never pick the same rows (nor meet SQLITE_BUSY half-way). $1 is JSON.
  sqlite: (db, queues) => ({
    queues,
    sql: (executor, params) => executor.transaction((tx) => tx.query<ClaimRow>(sqliteClaim(db, queues.length, Number(params[4]), Number(params[1])), params)),
  }),
  // No UPDATE … RETURNING: lock the rows, update them with a token each (made here, each row
  // picking its own), read them back, in one transaction.
  mysql: (db, queues) => ({
    queues,
    sql: (executor, [, limit, lease, workerId, start]) =>
      lockUpdateRead<{ id: number }, ClaimRow>(db, executor, {
        // One locked index walk per queue: `queue IN (…)` of several queues makes MariaDB scan
        // and filesort the whole backlog. Rows locked here but not taken stay pending; the
        // locks end with this short transaction.
        lock: async (tx) => {
          const candidates: { id: number; priority: number }[] = [];
          for (const queue of queues) {
            const found = await tx.query<{ id: number | string; priority: number }>(readyInQueue(db, "$1", "$2", noFlowIn(db, "queue IN ($3)")), [
              queue,
              limit,
              queues,
            ]);
            for (const row of found.rows) candidates.push({ id: Number(row.id), priority: Number(row.priority) });
          }
          candidates.sort((a, b) => b.priority - a.priority || a.id - b.id);
          return candidates.slice(0, Number(limit)).map(({ id }) => ({ id }));
        },
        set: (kept) => {
          const starting = kept.slice(0, Number(start)).map((k) => k.id);
          return {
            set: `status = 'running', claim_token = ${db.sql.mariadb!.valueForId("$1", "$2")},
                  attempts = CASE WHEN id IN ($5) THEN attempts + 1 ELSE attempts END,
                  started_at = CASE WHEN id IN ($5) THEN ${db.sql.now} END,
                  locked_until = ${db.sql.nowPlus("$3")}, heartbeat_at = ${db.sql.now}, locked_by = $4, updated_at = ${db.sql.now}`,
            // IN () is a syntax error: 0 never names a row.
            params: [kept.map(() => randomUUID()), lease, workerId, starting.length > 0 ? starting : [0]],
          };
        },
        answer: columnList(db.sql, CLAIMED),
      }),
  }),
};

/**
 * SQLite's claim of `start` of `limit` jobs started now. The first $5 of the pick start (one
 * statement, one snapshot: the same rows). A claim that starts all it takes (a worker without
 * prefetch) or none (a buffer's refill) says so without a CASE; otherwise the pick is
 * materialised once and read three times, rather than walked again by each CASE.
 */
function sqliteClaim(db: JobsDatabase, queues: number, start: number, limit: number): string {
  const update = (attempts: string, startedAt: string, ids: string) => `UPDATE ${db.table}
           SET status = 'running', claim_token = ${db.sql.newToken}, attempts = ${attempts}, started_at = ${startedAt},
               locked_until = ${db.sql.nowPlus("$3")}, heartbeat_at = ${db.sql.now}, locked_by = $4, updated_at = ${db.sql.now}
           WHERE id IN (${ids})
           RETURNING ${columnList(db.sql, CLAIMED)}`;
  if (start <= 0) return update("attempts", "NULL", sqlitePick(db, queues, "$2", "id"));
  if (start >= limit) return update("attempts + 1", db.sql.now, sqlitePick(db, queues, "$2", "id"));
  const starting = "id IN (SELECT id FROM picked ORDER BY priority DESC, id LIMIT $5)";
  return `WITH picked AS MATERIALIZED (${sqlitePick(db, queues, "$2", "id, priority")})
    ${update(`CASE WHEN ${starting} THEN attempts + 1 ELSE attempts END`, `CASE WHEN ${starting} THEN ${db.sql.now} END`, "SELECT id FROM picked")}`;
}

/**
 * SQLite: the jobs to claim, one index walk per queue (`queue IN (json_each)` would scan the
 * table and sort it in a temporary B-tree). `$1` is the JSON array of queue names.
 */
function sqlitePick(db: JobsDatabase, queues: number, limit: string, columns: "id" | "id, priority"): string {
  const noFlow = noFlowIn(db, db.sql.inList("queue", "$1"));
  const perQueue = Array.from({ length: queues }, (_, i) => `SELECT id, priority FROM (${readyInQueue(db, `json_extract($1, '$[${i}]')`, limit, noFlow)})`);
  return `SELECT ${columns} FROM (${perQueue.join(" UNION ALL ")}) ORDER BY priority DESC, id LIMIT ${limit}`;
}

/** What a claim took, and how the claim loop should go on. */
export interface ClaimResult {
  jobs: ClaimedJob[];
  /** The fair claim served these queues (they hold jobs with a group or a concurrency key). */
  fair: boolean;
  /** Limited keys were among the fair claim's candidates: the next claim goes straight to the locking claim. */
  limited: boolean;
  /** When a job held back by its key's rate can next start, if one was. */
  retryInMs: number | null;
  /** Keys whose pending jobs the claim held back (at their concurrency limit or out of tokens). */
  throttled: string[];
}

export async function claimJobs(db: JobsDatabase, request: ClaimRequest): Promise<ClaimResult> {
  if (request.limit <= 0 || request.queues.length === 0) return { jobs: [], fair: false, retryInMs: null, throttled: [], limited: false };
  const start = Math.max(0, Math.min(request.start, request.limit));
  const promoting = promoteDue(db, request.promote === "always");
  if (promoting) await promoting;
  const rows: ClaimRow[] = [];
  if (!request.fair) {
    const claim = forDialect(CLAIM, db.dialect, "claim")(db, request.queues);
    rows.push(...(await runSql<ClaimRow>(db.executor, claim.sql, [claim.queues, request.limit, request.lease, request.workerId, start], "claim")).rows);
  }
  if (rows.length > 0) {
    return {
      jobs: rows.map((row) => toClaimed(db.sql, row)).sort(byClaimOrder),
      fair: false,
      retryInMs: null,
      throttled: [],
      limited: false,
    };
  }
  // Nothing plain: flow jobs may be waiting (the plain claim stands aside for them), or nothing is ready.
  if (db.dialect === "postgres" && !request.limited) {
    const one = await claimInOneStatement<ClaimRow>(db, { ...request, start }, columnList(db.sql, CLAIMED, { alias: "j", epochTimestamps: true }));
    if (!one.limited) {
      const jobs = one.rows.map((row) => toClaimed(db.sql, row));
      return { jobs, fair: one.flow, retryInMs: null, throttled: [], limited: false };
    }
  }
  const fair = await fairClaim<ClaimRow>(
    db,
    { queues: request.queues, limit: request.limit, start, lease: request.lease, workerId: request.workerId, served: request.served },
    columnList(db.sql, CLAIMED, { epochTimestamps: true }),
  );
  // Taken in fair-share order, which a worker keeps (it runs a claim's jobs in the claim's order).
  return {
    jobs: fair.rows.map((row) => toClaimed(db.sql, row)),
    fair: fair.flow,
    retryInMs: fair.retryInMs,
    throttled: fair.throttled,
    limited: fair.limited,
  };
}

function byClaimOrder(a: ClaimedJob, b: ClaimedJob): number {
  return b.priority - a.priority || a.id - b.id;
}
