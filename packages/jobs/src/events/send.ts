import { resolveDb } from "../core/connect.js";
import { answerWaits, notifyAnswered } from "./answer-waits.js";
import { checkSendEvent, type SendEventOptions } from "./event-input.js";
import { eventTables, lockEvent } from "./event-lock.js";

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
    await lockEvent(db, tx, match);
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
