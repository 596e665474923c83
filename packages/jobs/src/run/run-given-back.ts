import type { JobsDatabase } from "../core/database.js";

/**
 * A run that ends without using its attempt — a durable sleep, a wait for an event or a child,
 * a wait answered at once — as one fenced UPDATE: `set` (the job's new status and what goes with
 * it), the attempt given back (a job never started in this claim counted none), the claim
 * released. `$1` is the job's id, `$2` the run's claim token; no row changed means the job was
 * no longer this run's. Each SET of `set` may read the row's values before the write, none of
 * those below it changes (MariaDB assigns left to right).
 */
export function runGivenBackSql(db: JobsDatabase, set: string): string {
  return `
    UPDATE ${db.table}
    SET ${set},
        attempts = CASE WHEN started_at IS NOT NULL THEN attempts - 1 ELSE attempts END,
        locked_until = NULL, claim_token = NULL, updated_at = ${db.sql.now}
    WHERE id = $1 AND claim_token = $2 AND status = 'running'`;
}

/** The job was taken over while its run ended so: the transaction rolls back, and the caller answers false. */
export class Fenced extends Error {}
