import type { JobsDatabase } from "../core/database.js";
import type { Listener } from "../db/executor.js";

/**
 * Who hears that a job ended: waitForJob's waiters (reads/wait-for-job.ts).
 *
 * PostgreSQL: the server says it, on `<queue channel>.ended` with the job's id, from a trigger
 * that fires only for rows flagged `awaited` (migrations/progress.ts), so ending a job nobody
 * awaits sends nothing. Elsewhere: an ending write in this process tells this process's waiters
 * on the same database (whileEnding calls announceEnded), without ids, and they read their job
 * again; waiters in other processes poll. With no waiter in the process, announceEnded is one
 * comparison.
 */

/** waitForJob calls in this process now waiting: only waitForJob changes it. */
let localWaiters = 0;

/** The channel of ended awaited jobs; the trigger of migration 23 names the same (endedChannelOf). */
export function endedChannel(db: JobsDatabase): string {
  return `${db.channel}.ended`;
}

/** After a write that may have ended jobs, on backends that cannot push: wake this process's waiters. */
export function announceEnded(db: JobsDatabase): void {
  if (localWaiters === 0 || db.dialect === "postgres") return;
  db.executor.notify?.(endedChannel(db), "");
}

interface Shared {
  ready: Promise<Listener | null>;
  waiters: Set<(payload: string) => void>;
}

/** One subscription per database, shared by its waiters: on PostgreSQL each is a connection. */
const subscriptions = new WeakMap<JobsDatabase, Shared>();

/**
 * Calls `onMessage` with an ended job's id (PostgreSQL) or "" (some job ended: read again)
 * until closed. A subscription that fails or is lost calls it with "" and leaves the waiter
 * to its polling; so does a backend without one (behind a transaction pooler).
 */
export async function listenEnded(db: JobsDatabase, onMessage: (payload: string) => void): Promise<Listener> {
  localWaiters++;
  let entry = subscriptions.get(db);
  if (!entry && db.executor.listen) {
    const waiters = new Set<(payload: string) => void>();
    const wakeAll = (payload: string) => {
      for (const waiter of [...waiters]) waiter(payload);
    };
    const created: Shared = { waiters, ready: Promise.resolve(null) };
    const lost = () => {
      if (subscriptions.get(db) === created) subscriptions.delete(db);
      wakeAll("");
    };
    created.ready = db.executor.listen(endedChannel(db), wakeAll, lost).catch(() => {
      lost();
      return null;
    });
    subscriptions.set(db, (entry = created));
  }
  entry?.waiters.add(onMessage);
  await entry?.ready;
  let closed = false;
  return {
    close: async () => {
      if (closed) return;
      closed = true;
      localWaiters--;
      if (!entry) return;
      entry.waiters.delete(onMessage);
      if (entry.waiters.size > 0) return;
      if (subscriptions.get(db) === entry) subscriptions.delete(db);
      await (await entry.ready)?.close();
    },
  };
}
