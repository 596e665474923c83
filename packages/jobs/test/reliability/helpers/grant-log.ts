import type { TestDatabase } from "../../helpers/backends.js";
import { keyText, serialColumn } from "./dialect.js";
import type { HistoryEvent } from "./history.js";

/** One run granted by the database: its attempt counted for this token, the `seq`-th grant of the test. */
export interface Grant {
  seq: number;
  job: number;
  attempt: number;
}

/**
 * The grant order as the database decided it. A worker process records its claim when the
 * handler is called, by its own clock; on SQLite a process can stall in between for seconds (a
 * synchronous busy wait on the one write lock), long enough for its 2 s lease to lapse and
 * another worker to take the job and record attempt 2 before attempt 1. A trigger on the jobs
 * table logs each grant instead, in the transaction that makes it: a claim or start write that
 * sets `started_at` for a new token. One job's grants are serialised by its row lock, so the
 * log's sequence is their commit order on every backend.
 */
export async function installGrantLog(t: TestDatabase): Promise<() => Promise<Map<string, Grant>>> {
  const log = t.tableName("grant_log");
  const jobs = t.db.table;
  await t.sql(`CREATE TABLE ${log} (${serialColumn(t.db.dialect)}, job_id bigint NOT NULL, token ${keyText(t.db.dialect)} NOT NULL, attempt integer NOT NULL)`);
  const insert = `INSERT INTO ${log} (job_id, token, attempt)`;
  switch (t.db.dialect) {
    case "postgres": {
      const fn = t.tableName("grant_log_row");
      await t.sql(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.started_at IS NOT NULL AND NEW.claim_token IS NOT NULL
             AND (OLD.started_at IS NULL OR OLD.claim_token IS DISTINCT FROM NEW.claim_token) THEN
            ${insert} VALUES (NEW.id, NEW.claim_token::text, NEW.attempts);
          END IF;
          RETURN NULL;
        END $$`);
      await t.sql(`CREATE TRIGGER grant_log AFTER UPDATE ON ${jobs} FOR EACH ROW EXECUTE FUNCTION ${fn}()`);
      break;
    }
    case "sqlite":
      await t.sql(`CREATE TRIGGER grant_log AFTER UPDATE ON ${jobs} FOR EACH ROW
        WHEN NEW.started_at IS NOT NULL AND NEW.claim_token IS NOT NULL AND (OLD.started_at IS NULL OR OLD.claim_token IS NOT NEW.claim_token)
        BEGIN ${insert} VALUES (NEW.id, NEW.claim_token, NEW.attempts); END`);
      break;
    case "mysql":
      await t.sql(`CREATE TRIGGER ${t.tableName("grant_log")} AFTER UPDATE ON ${jobs} FOR EACH ROW
        ${insert} SELECT NEW.id, NEW.claim_token, NEW.attempts FROM DUAL
        WHERE NEW.started_at IS NOT NULL AND NEW.claim_token IS NOT NULL AND (OLD.started_at IS NULL OR NOT (OLD.claim_token <=> NEW.claim_token))`);
      break;
  }
  return async () => {
    const rows = await t.sql<{ seq: number | string; job_id: number | string; token: string; attempt: number | string }>(
      `SELECT seq, job_id, token, attempt FROM ${log} ORDER BY seq`,
    );
    return new Map(rows.map((r) => [String(r.token), { seq: Number(r.seq), job: Number(r.job_id), attempt: Number(r.attempt) }]));
  };
}

/** How many runs their workers recorded after a run of the same job the database granted later. */
export function recordedOutOfOrder(history: readonly HistoryEvent[], grants: ReadonlyMap<string, Grant>): number {
  const claims = history.filter((e): e is Extract<HistoryEvent, { kind: "claimed" }> => e.kind === "claimed" && grants.has(e.token));
  return claims.filter((a) => claims.some((b) => b.job === a.job && grants.get(b.token)!.seq > grants.get(a.token)!.seq && b.at < a.at)).length;
}
