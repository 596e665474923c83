import type { JobsDatabase } from "./db/database.js";
import { forDialect, type PerDialect } from "./sql.js";

/** One finished run, reported with the token it was claimed under. */
export interface Completion {
  id: number;
  token: string;
  /** JSON text of the handler's result, or null. */
  result: string | null;
}

const COMPLETE: PerDialect<(db: JobsDatabase) => string> = {
  // Fenced: a row whose token changed (taken over) or that is no longer running is left alone.
  postgres: (db) => `
    UPDATE ${db.table} AS j
    SET status = 'done', result = v.result::jsonb, finished_at = now(), updated_at = now(), locked_until = NULL
    FROM unnest($1::bigint[], $2::uuid[], $3::text[]) AS v(id, token, result)
    WHERE j.id = v.id AND j.claim_token = v.token AND j.status = 'running'
    RETURNING j.id`,
};

/** Marks jobs done in one statement; returns the ids that were still ours (the rest were fenced). */
export async function completeJobs(db: JobsDatabase, completions: readonly Completion[]): Promise<Set<number>> {
  if (completions.length === 0) return new Set();
  const { rows } = await db.executor.query<{ id: number | string }>(forDialect(COMPLETE, db.dialect, "complete")(db), [
    completions.map((c) => c.id),
    completions.map((c) => c.token),
    completions.map((c) => c.result),
  ]);
  return new Set(rows.map((r) => Number(r.id)));
}
