import type { JobsDatabase } from "../core/database.js";
import type { OrderedSender, QueryResult } from "../db/executor.js";
import { forDialect, runSql, type PerDialect, type Script } from "../core/sql.js";

/**
 * The rule of the worker's buffer: a claim counts an attempt only for the jobs that start at
 * once; the rest are held unstarted (`started_at` NULL) and this write counts theirs just
 * before their handlers run. A worker that dies holding unstarted jobs therefore gives them
 * back unused (reclaim returns them pending, attempts unchanged), while a job whose handler
 * ran — even one that crashed its process — has used its attempt.
 *
 * The write also renews the lease and is fenced by the token: a job taken over while it sat
 * in the buffer (a stalled process, a lapsed lease) is not in the answer and never starts.
 * Counting is idempotent (only while `started_at` is NULL), so a write retried after a lost
 * reply does not count twice.
 */
const START: PerDialect<(db: JobsDatabase) => string | Script<{ claim_token: string }>> = {
  // `j.id = ANY($1)`: a primary-key index scan, and no `status` condition, which steers the
  // planner to the jobs_running index (see COMPLETE in complete.ts): the token alone is the
  // fence, cleared whenever a job leaves `running`.
  // No wait for the WAL flush (synchronous_commit off, for this transaction only): one start
  // write per few jobs would otherwise pay a disk flush each. If the server crashes before the
  // flush, a job that started comes back unstarted: at worst a free extra attempt, never a
  // lost job (the claim itself is durable).
  postgres: (db) => `
    UPDATE ${db.table} AS j
    SET attempts = j.attempts + CASE WHEN j.started_at IS NULL THEN 1 ELSE 0 END,
        started_at = COALESCE(j.started_at, now()),
        locked_until = now() + make_interval(secs => $3), heartbeat_at = now(), updated_at = now()
    FROM unnest($1::bigint[], $2::uuid[]) AS v(id, token),
         (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed
    WHERE j.id = ANY($1::bigint[]) AND j.id = v.id AND j.claim_token = v.token
    RETURNING v.token::text AS claim_token`,
  // Rows found by id (rowid), as in complete.ts; + keeps the planner off the jobs_running index.
  sqlite:
    (db) =>
    (executor, [ids, tokens, lease]) =>
      executor.query<{ claim_token: string }>(
        `UPDATE ${db.table} AS j
       SET attempts = j.attempts + CASE WHEN j.started_at IS NULL THEN 1 ELSE 0 END,
           started_at = COALESCE(j.started_at, ${db.sql.now}),
           locked_until = ${db.sql.nowPlus("$2")}, heartbeat_at = ${db.sql.now}, updated_at = ${db.sql.now}
       FROM (SELECT json_extract(e.value, '$[0]') AS id, json_extract(e.value, '$[1]') AS token FROM json_each($1) AS e) AS v
       WHERE j.id = v.id AND j.claim_token = v.token AND +j.status = 'running'
       RETURNING claim_token`,
        [JSON.stringify((ids as number[]).map((id, i) => [id, (tokens as string[])[i]])), lease],
      ),
  // No UPDATE … RETURNING. One UPDATE matched on (id, token) — the id list and the token list
  // pair up exactly, a token being one run's — and its count of matched rows is the answer
  // when every run matched, as all do unless one was taken over in the buffer. Only then are
  // the rows read back: the tokens still ours among those the UPDATE just started. The UPDATE
  // renewed their leases, so only a forced takeover can come in between, and its run is stale
  // either way.
  mysql:
    (db) =>
    async (executor, [ids, tokens, lease]) => {
      const runs = { ids: ids as number[], tokens: tokens as string[] };
      const which = `${db.sql.inList("id", "$1")} AND ${db.sql.inList("claim_token", "$2")} AND status = 'running'`;
      // The primary key, named: with the token and status conditions beside the ids, the planner
      // may pick an index on status and scan (and InnoDB lock) every running job.
      const { rowCount } = await executor.query(
        `UPDATE ${db.table} FORCE INDEX (PRIMARY)
         SET attempts = attempts + CASE WHEN started_at IS NULL THEN 1 ELSE 0 END,
             started_at = COALESCE(started_at, ${db.sql.now}),
             locked_until = ${db.sql.nowPlus("$3")}, heartbeat_at = ${db.sql.now}, updated_at = ${db.sql.now}
         WHERE ${which}`,
        [runs.ids, runs.tokens, lease],
      );
      if (rowCount === runs.ids.length) return { rows: runs.tokens.map((claim_token) => ({ claim_token })), rowCount };
      return executor.query<{ claim_token: string }>(`SELECT claim_token FROM ${db.table} WHERE ${which} AND started_at IS NOT NULL`, [runs.ids, runs.tokens]);
    },
};

/** A start write under way: `sent` once the statement is on its way, `owned` with its answer. */
export interface StartWrite {
  sent: Promise<void>;
  owned: Promise<Set<string>>;
}

/**
 * Counts the attempts of held jobs about to start; `owned` resolves with the tokens still
 * ours. Sent where the driver can say when a statement has left (see OrderedSender), `sent`
 * comes without a round trip and the caller may run handlers at once — a process killed after
 * that point still has their starts recorded by the server. Elsewhere `sent` waits for the answer.
 */
export function sendStarts(db: JobsDatabase, sender: OrderedSender | null, unordered: readonly { id: number; token: string }[], lease: number): StartWrite {
  // Id order, as in extendLeases and completeRuns: one lock order on every connection.
  const claims = [...unordered].sort((a, b) => a.id - b.id);
  const params = [claims.map((c) => c.id), claims.map((c) => c.token), lease];
  const sql = forDialect(START, db.dialect, "start")(db);
  let sent: Promise<void>;
  let result: Promise<QueryResult<{ claim_token: string }>>;
  if (sender && typeof sql === "string") {
    ({ sent, result } = sender.send<{ claim_token: string }>(sql, params, "start"));
  } else {
    result = runSql(db.executor, sql, params, "start");
    sent = result.then(() => undefined);
  }
  const owned = result.then(({ rows }) => new Set(rows.map((r) => String(r.claim_token))));
  // A caller reads one of the two (which one depends on how fresh the leases are): the other
  // must not become an unhandled rejection that ends the process when the connection drops.
  sent.catch(() => undefined);
  owned.catch(() => undefined);
  return { sent, owned };
}
