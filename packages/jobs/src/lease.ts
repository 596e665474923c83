import { resolveDb, type DbLike } from "./connect.js";
import type { JobsDatabase } from "./db/database.js";
import { checkSeconds } from "./validate.js";
import { forDialect, type PerDialect } from "./sql.js";

/** Default lease, in seconds: an orphaned job is back in work about this long after its worker died. */
export const DEFAULT_LEASE_SECONDS = 30;

const EXTEND: PerDialect<(db: JobsDatabase) => string> = {
  postgres: (db) => `
    UPDATE ${db.table}
    SET locked_until = now() + make_interval(secs => $2), heartbeat_at = now()
    WHERE claim_token = ANY($1::uuid[]) AND status = 'running'
    RETURNING claim_token::text AS claim_token`,
};

/**
 * Extends the leases of the given claims from the database's now; returns the tokens that
 * are still valid. A token missing from the answer lost its job (taken over or cancelled).
 */
export async function extendLeases(db: JobsDatabase, tokens: readonly string[], lease: number): Promise<Set<string>> {
  if (tokens.length === 0) return new Set();
  const { rows } = await db.executor.query<{ claim_token: string }>(forDialect(EXTEND, db.dialect, "extend leases")(db), [tokens, lease]);
  return new Set(rows.map((r) => String(r.claim_token)));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * "I am still working": extends the lease of the job claimed under `token`. False when the
 * token names no running job — the work may be being redone elsewhere; stop.
 */
export async function heartbeat(token: string, options: { lease?: number; db?: DbLike } = {}): Promise<boolean> {
  const db = resolveDb(options.db);
  const lease = options.lease === undefined ? DEFAULT_LEASE_SECONDS : checkSeconds(options.lease, "lease");
  if (typeof token !== "string" || !UUID.test(token)) return false;
  return (await extendLeases(db, [token], lease)).has(token);
}
