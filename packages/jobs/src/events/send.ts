import { resolveDb } from "../core/connect.js";
import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { stepsTable } from "../run/step-store.js";
import { answerWaits, notifyAnswered } from "./answer-waits.js";
import { checkSendEvent, type SendEventOptions } from "./event-input.js";
import { eventTables, lockEvent, type EventMatch } from "./event-lock.js";

export type { SendEventOptions } from "./event-input.js";

/**
 * Sends an event: records it and wakes every job waiting for it (`ctx.waitForEvent` of the same
 * event, key and tenant), each with `data`, in one transaction — with `db` set to a client inside
 * your transaction, in yours: nothing is sent if you roll back. Returns how many waiting jobs it
 * woke. The event is kept (until `prune` removes it) for the jobs that wait for it later.
 */
export async function sendEvent(event: string, data: unknown, options: SendEventOptions): Promise<number> {
  const input = checkSendEvent(event, data, options);
  const db = resolveDb(options.db);
  const { match } = input;
  return db.executor.transaction(async (tx) => {
    // First and apart: the statements after it must see every wait committed before the lock
    // was granted, and a statement sees only what committed before it began.
    await lockEvent(db, tx, match);
    if (db.dialect === "postgres") return deliverInOne(db, tx, match, input.data);
    await tx.query(`INSERT INTO ${eventTables(db).events} (name, event_key, tenant, data, created_at) VALUES ($1, $2, $3, $4, ${db.sql.now})`, [
      match.event,
      match.key,
      match.tenant,
      input.data,
    ]);
    const answered = await answerWaits(
      db,
      tx,
      { where: "w.event = $1 AND w.event_key = $2 AND w.tenant = $3", params: [match.event, match.key, match.tenant] },
      input.data ?? "null",
    );
    // The waits of jobs cancelled while they waited go with the event that would have woken them.
    await tx.query(`DELETE FROM ${eventTables(db).waits} WHERE event = $1 AND event_key = $2 AND tenant = $3`, [match.event, match.key, match.tenant]);
    await notifyAnswered(db, tx, answered);
    return answered.length;
  });
}

/**
 * PostgreSQL: what the other backends do in five statements (answer-waits.ts), in one — the
 * event recorded, the waiting jobs locked in id order, each wait's step saved with the data, the
 * jobs back to pending, every wait of the event deleted (those of jobs cancelled meanwhile too),
 * their queues notified at commit — so that a send costs one round trip after its lock.
 */
async function deliverInOne(db: JobsDatabase, tx: Executor, match: EventMatch, data: string | null): Promise<number> {
  const { events, waits } = eventTables(db);
  const { rows } = await tx.query<{ id: unknown; notified: unknown }>(
    `WITH event AS (
       INSERT INTO ${events} (name, event_key, tenant, data, created_at) VALUES ($1, $2, $3, CAST($4 AS text), now())
     ), picked AS (
       SELECT w.job_id, w.step, w.child_id, j.attempts FROM ${waits} AS w JOIN ${db.table} AS j ON j.id = w.job_id AND j.status = 'waiting'
       WHERE w.event = $1 AND w.event_key = $2 AND w.tenant = $3 ORDER BY w.job_id FOR UPDATE OF j
     ), saved AS (
       INSERT INTO ${stepsTable(db)} (job_id, name, kind, result, attempt, duration_ms, wake_at, created_at)
       SELECT job_id, step, CASE WHEN child_id IS NULL THEN 'event' ELSE 'invoke' END, COALESCE(CAST($4 AS text), 'null'), attempts, NULL, NULL, now() FROM picked
     ), woke AS (
       UPDATE ${db.table} AS j SET status = 'pending', run_at = now(), updated_at = now()
       FROM picked WHERE j.id = picked.job_id AND j.status = 'waiting' RETURNING j.id, j.queue
     ), gone AS (
       DELETE FROM ${waits} WHERE event = $1 AND event_key = $2 AND tenant = $3
     ), notified AS (
       SELECT count(pg_notify($5, queue)) AS n FROM (SELECT DISTINCT queue FROM woke) AS q
     )
     SELECT id, (SELECT n FROM notified) AS notified FROM woke`,
    [match.event, match.key, match.tenant, data, db.channel],
  );
  return rows.length;
}
