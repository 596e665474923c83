import type { JobsDatabase } from "./db/database.js";
import type { DialectName } from "./db/executor.js";
import { randomUUID } from "node:crypto";
import { MYSQL_NOW, mysqlNowPlus } from "./db/mysql.js";
import { SQLITE_NOW, SQLITE_UUID, sqliteNowPlus } from "./db/sqlite.js";
import { toDate } from "./job-row.js";
import { parseJson } from "./payload.js";
import { forDialect, runSql, type PerDialect, type Script } from "./sql.js";

/** A job this worker holds: every write about it is fenced by `token`. */
export interface ClaimedJob {
  id: number;
  queue: string;
  task: string;
  payload: unknown;
  priority: number;
  /** This run's number, 1-based (attempts once it has started). */
  attempt: number;
  /**
   * False for a job held in the worker's buffer: its attempt is not counted until `startRuns`
   * records the start, so a worker that dies holding it gives it back unused.
   */
  started: boolean;
  maxAttempts: number;
  progress: unknown;
  tenant: string | null;
  createdAt: Date;
  runAt: Date;
  token: string;
  /** The enqueuing span's context (OpenTelemetry), linked from the execution span. */
  traceContext?: unknown;
}

interface ClaimRow {
  id: number | string;
  queue: string;
  task: string;
  payload: unknown;
  priority: number;
  attempts: number;
  max_attempts: number;
  progress: unknown;
  tenant: string | null;
  created_at: unknown;
  run_at: unknown;
  claim_token: string;
  trace_context: unknown;
  started: number | boolean;
}

export interface ClaimRequest {
  queues: readonly string[];
  limit: number;
  /** Seconds the lease lasts from the database's now. */
  lease: number;
  workerId: string;
  /**
   * How many of the claimed jobs (the first, in claim order) start now: their attempt is
   * counted by the claim. The rest are held unstarted until `startRuns` (see start.ts).
   */
  start: number;
}

const CLAIMED_COLUMNS =
  "id, queue, task, payload, priority, attempts, max_attempts, progress, tenant, created_at, run_at, claim_token, trace_context, started_at IS NOT NULL AS started";

const CLAIM: PerDialect<(db: JobsDatabase, queues: number) => string | Script<ClaimRow>> = {
  // SKIP LOCKED: concurrent claimers pass over each other's rows instead of waiting on them.
  // One index walk per queue (LATERAL): `queue = ANY($1)` would lose the index order and sort
  // every pending row of the backlog on each claim; this stops after LIMIT rows per queue.
  // Timestamps come back as epoch milliseconds: pg's text-timestamp parser (a regex and a
  // Date per column) cost more per claimed job than the rest of the row.
  // The UPDATE finds the picked rows by `id = ANY(ARRAY(…))`, an index scan of the primary
  // key: joined `FROM picked`, the planner hash-joined a sequential scan of the whole table
  // whenever it was small enough to look cheap, most of the claim's time (bench/BENCHMARKS.md).
  // One queue (most workers): the walk alone, without unnest, LATERAL and the merge sort — a
  // simpler plan to make and run on every wake-up. $1 is then the queue name, not an array.
  postgres: (db, queues) => `
    WITH picked AS (${
      queues === 1
        ? `
      SELECT id, priority FROM ${db.table}
      WHERE status = 'pending' AND queue = $1 AND run_at <= now()
      ORDER BY priority DESC, id
      LIMIT $2
      FOR UPDATE SKIP LOCKED`
        : `
      SELECT p.id, p.priority FROM unnest($1::text[]) AS q(name)
      CROSS JOIN LATERAL (
        SELECT id, priority FROM ${db.table}
        WHERE status = 'pending' AND queue = q.name AND run_at <= now()
        ORDER BY priority DESC, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
      ) AS p
      ORDER BY p.priority DESC, p.id
      LIMIT $2`
    }
    ), starting AS (
      SELECT id FROM picked ORDER BY priority DESC, id LIMIT $5
    )
    UPDATE ${db.table} AS j
    SET status = 'running', claim_token = gen_random_uuid(),
        attempts = CASE WHEN j.id = ANY(ARRAY(SELECT id FROM starting)) THEN j.attempts + 1 ELSE j.attempts END,
        started_at = CASE WHEN j.id = ANY(ARRAY(SELECT id FROM starting)) THEN now() END,
        locked_until = now() + make_interval(secs => $3), heartbeat_at = now(), locked_by = $4, updated_at = now()
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.queue, j.task, j.payload, j.priority, j.attempts, j.max_attempts, j.progress, j.tenant,
              (extract(epoch FROM j.created_at) * 1000)::float8 AS created_at, (extract(epoch FROM j.run_at) * 1000)::float8 AS run_at,
              j.claim_token::text AS claim_token, j.trace_context, j.started_at IS NOT NULL AS started`,
  // SQLite has a single writer: BEGIN IMMEDIATE takes the write lock before the claim reads,
  // so two claimers never pick the same rows (nor meet SQLITE_BUSY half-way). $1 is JSON.
  // The first $5 of the same pick start now (one statement, one snapshot: the same rows).
  sqlite: (db, queues) => (executor, params) =>
    executor.transaction((tx) =>
      tx.query<ClaimRow>(
        `UPDATE ${db.table}
         SET status = 'running', claim_token = ${SQLITE_UUID},
             attempts = CASE WHEN id IN (${sqlitePick(db, queues, "$5")}) THEN attempts + 1 ELSE attempts END,
             started_at = CASE WHEN id IN (${sqlitePick(db, queues, "$5")}) THEN ${SQLITE_NOW} END,
             locked_until = ${sqliteNowPlus("$3")}, heartbeat_at = ${SQLITE_NOW}, locked_by = $4, updated_at = ${SQLITE_NOW}
         WHERE id IN (${sqlitePick(db, queues, "$2")})
         RETURNING ${CLAIMED_COLUMNS}`,
        params,
      ),
    ),
  // MariaDB has SKIP LOCKED but no UPDATE … RETURNING: lock the rows, update them with a
  // token each (made here; ELT(FIELD(id, ids…), tokens…) picks a row's own), read them back,
  // in one transaction. neg_priority = -priority: the index walks priority DESC, id forwards.
  mysql: (db) => (executor, [queues, limit, lease, workerId, start]) =>
    executor.transaction(async (tx) => {
      // One locked index walk per queue: `queue IN (…)` of several queues makes MariaDB scan
      // and filesort the whole backlog. Rows locked here but not taken stay pending; the
      // locks end with this short transaction.
      const candidates: { id: number; priority: number }[] = [];
      for (const queue of queues as readonly string[]) {
        const found = await tx.query<{ id: number | string; priority: number }>(
          `SELECT id, priority FROM ${db.table}
           WHERE status = 'pending' AND queue = $1 AND run_at <= ${MYSQL_NOW}
           ORDER BY neg_priority, id
           LIMIT $2
           FOR UPDATE SKIP LOCKED`,
          [queue, limit],
        );
        for (const row of found.rows) candidates.push({ id: Number(row.id), priority: Number(row.priority) });
      }
      if (candidates.length === 0) return { rows: [], rowCount: 0 };
      candidates.sort((a, b) => b.priority - a.priority || a.id - b.id);
      const ids = candidates.slice(0, Number(limit)).map((c) => c.id);
      const starting = ids.slice(0, Number(start));
      await tx.query(
        `UPDATE ${db.table}
         SET status = 'running', claim_token = ELT(FIELD(id, $1), $2),
             attempts = CASE WHEN id IN ($5) THEN attempts + 1 ELSE attempts END,
             started_at = CASE WHEN id IN ($5) THEN ${MYSQL_NOW} END,
             locked_until = ${mysqlNowPlus("$3")}, heartbeat_at = ${MYSQL_NOW}, locked_by = $4, updated_at = ${MYSQL_NOW}
         WHERE id IN ($1)`,
        // IN () is a syntax error: 0 never names a row.
        [ids, ids.map(() => randomUUID()), lease, workerId, starting.length > 0 ? starting : [0]],
      );
      return tx.query<ClaimRow>(`SELECT ${CLAIMED_COLUMNS} FROM ${db.table} WHERE id IN ($1)`, [ids]);
    }),
};

/**
 * SQLite: the ids to claim, one index walk per queue (`queue IN (json_each)` would scan the
 * table and sort it in a temporary B-tree). `$1` is the JSON array of queue names.
 */
function sqlitePick(db: JobsDatabase, queues: number, limit: string): string {
  const perQueue = Array.from(
    { length: queues },
    (_, i) => `SELECT id, priority FROM (SELECT id, priority FROM ${db.table}
       WHERE status = 'pending' AND queue = json_extract($1, '$[${i}]') AND run_at <= ${SQLITE_NOW}
       ORDER BY priority DESC, id LIMIT ${limit})`,
  );
  return `SELECT id FROM (${perQueue.join(" UNION ALL ")}) ORDER BY priority DESC, id LIMIT ${limit}`;
}

export async function claimJobs(db: JobsDatabase, request: ClaimRequest): Promise<ClaimedJob[]> {
  if (request.limit <= 0 || request.queues.length === 0) return [];
  const single = db.dialect === "postgres" && request.queues.length === 1;
  const { rows } = await runSql<ClaimRow>(db.executor, forDialect(CLAIM, db.dialect, "claim")(db, request.queues.length), [
    single ? request.queues[0] : request.queues,
    request.limit,
    request.lease,
    request.workerId,
    Math.max(0, Math.min(request.start, request.limit)),
  ], "claim");
  return rows.map((row) => toClaimed(row, db.dialect)).sort((a, b) => b.priority - a.priority || a.id - b.id);
}

function toClaimed(row: ClaimRow, dialect: DialectName): ClaimedJob {
  const started = Boolean(Number(row.started));
  return {
    id: Number(row.id),
    queue: row.queue,
    task: row.task,
    payload: parseJson(row.payload, dialect),
    priority: Number(row.priority),
    // A held job's attempt is counted when it starts: it will run as attempts + 1.
    attempt: Number(row.attempts) + (started ? 0 : 1),
    started,
    maxAttempts: Number(row.max_attempts),
    progress: parseJson(row.progress, dialect),
    tenant: row.tenant,
    createdAt: toDate(row.created_at),
    runAt: toDate(row.run_at),
    token: String(row.claim_token),
    traceContext: parseJson(row.trace_context, dialect),
  };
}
