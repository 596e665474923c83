import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import { checkLease, type HeartbeatOptions } from "../core/options.js";
import { HEARTBEAT_OPTION_KEYS, checkOptions } from "../core/option-keys.js";
import { lockUpdateRead } from "../core/lock-update-read.js";
import { forDialect, runOverClaims, runSql, type PerDialect, type Script } from "../core/sql.js";

export { DEFAULT_LEASE_SECONDS } from "../core/options.js";

/**
 * Extensions sent per lease while a job is held: a lease survives two lost or late ones
 * before it can lapse.
 */
export const EXTENSIONS_PER_LEASE = 3;

// A lease is never shortened: every claim and extension sets locked_until and heartbeat_at
// together, so `locked_until - heartbeat_at` is the lease the job holds, and an extension
// grants at least that (a heartbeat asking for less would let the job be taken while it runs).
const EXTEND: PerDialect<(db: JobsDatabase) => string | Script<{ claim_token: string }>> = {
  // With the ids (a worker's own jobs), the join runs through the primary key: matching
  // thousands of tokens with `= ANY` against every running row costs tokens × rows. A token
  // is cleared whenever its job leaves `running`, so the token alone is the fence.
  // `j.id = ANY($3)` keeps it an index scan (see COMPLETE in complete.ts).
  postgres:
    (db) =>
    (executor, [tokens, lease, ids]) =>
      ids
        ? executor.query<{ claim_token: string }>(
            `UPDATE ${db.table} AS j
           SET locked_until = now() + GREATEST(make_interval(secs => $2), j.locked_until - j.heartbeat_at), heartbeat_at = now()
           FROM unnest($3::bigint[], $1::uuid[]) AS v(id, token)
           WHERE j.id = ANY($3::bigint[]) AND j.id = v.id AND j.claim_token = v.token
           RETURNING v.token::text AS claim_token`,
            [tokens, lease, ids],
            "extend",
          )
        : executor.query<{ claim_token: string }>(
            `UPDATE ${db.table}
           SET locked_until = now() + GREATEST(make_interval(secs => $2), locked_until - heartbeat_at), heartbeat_at = now()
           WHERE claim_token = ANY($1::uuid[]) AND status = 'running'
           RETURNING claim_token::text AS claim_token`,
            [tokens, lease],
            "heartbeat",
          ),
  sqlite: (db) => `
    UPDATE ${db.table}
    SET locked_until = ${db.sql.now} + MAX(CAST(ROUND($2 * 1000.0) AS INTEGER), locked_until - heartbeat_at), heartbeat_at = ${db.sql.now}
    WHERE claim_token IN (SELECT value FROM json_each($1)) AND status = 'running'
    RETURNING claim_token`,
  // No UPDATE … RETURNING: lock the rows that are still running under these tokens, extend those.
  mysql:
    (db) =>
    (executor, [tokens, lease]) =>
      lockUpdateRead<{ id: number | string; claim_token: string }, { claim_token: string }>(db, executor, {
        lock: async (tx) =>
          (
            await tx.query<{ id: number | string; claim_token: string }>(
              `SELECT id, claim_token FROM ${db.table} WHERE claim_token IN ($1) AND status = 'running' ORDER BY id FOR UPDATE`,
              [tokens],
            )
          ).rows,
        // Left to right: locked_until is set from the old heartbeat_at, before that changes.
        set: () => ({
          set: `locked_until = ${db.sql.now} + INTERVAL GREATEST(ROUND($2 * 1000000), TIMESTAMPDIFF(MICROSECOND, heartbeat_at, locked_until)) MICROSECOND,
              heartbeat_at = ${db.sql.now}`,
          params: [lease],
        }),
        answer: (kept) => kept.map(({ claim_token }) => ({ claim_token })),
      }),
};

/**
 * Extends the leases of the given claims from the database's now; returns the tokens that
 * are still valid. A token missing from the answer lost its job (taken over or cancelled).
 */
export function extendLeases(db: JobsDatabase, unordered: readonly { id: number; token: string }[], lease: number): Promise<Set<string>> {
  // Rows are locked in id order, here and in completeRuns, or an extension and a completion
  // over the same jobs on two connections can deadlock.
  return runOverClaims(
    db.executor,
    unordered,
    forDialect(EXTEND, db.dialect, "extend leases")(db),
    (claims) => [claims.map((c) => c.token), lease, claims.map((c) => c.id)],
    "extend",
  );
}

/** The same for one token whose job id the caller does not know (the public `heartbeat`). */
async function extendByToken(db: JobsDatabase, token: string, lease: number): Promise<boolean> {
  const { rows } = await runSql<{ claim_token: string }>(db.executor, forDialect(EXTEND, db.dialect, "extend leases")(db), [[token], lease, null]);
  return rows.some((r) => String(r.claim_token) === token);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * "I am still working": extends the lease of the job claimed under `token` by the lease it was
 * claimed with, or by `lease` seconds when that is longer — never less. False when the token
 * names no running job — the work may be being redone elsewhere; stop.
 */
export async function heartbeat(token: string, options: HeartbeatOptions = {}): Promise<boolean> {
  checkOptions(options, HEARTBEAT_OPTION_KEYS, "heartbeat");
  // Omitted: the lease the job holds (0 asks for nothing more).
  const lease = options.lease === undefined ? 0 : checkLease(options.lease);
  const db = resolveDb(options.db);
  if (typeof token !== "string" || !UUID.test(token)) return false;
  return extendByToken(db, token, lease);
}
