import { randomUUID } from "node:crypto";
import type { Listener } from "./executor.js";

/**
 * Wake-ups inside one process, for backends the server cannot push from (SQLite): an enqueue
 * tells the workers of this process that share its database at once, instead of leaving the
 * job to their next poll. Workers in other processes still poll. Keyed by the database's
 * identity (a SQLite file's absolute path) and channel, so two connections to one file meet.
 */
const subscribers = new Map<string, Set<(payload: string) => void>>();
const identities = new WeakMap<object, string>();

/**
 * The database behind a driver handle (a better-sqlite3 Database, a mysql2 pool or connection),
 * worked out once per handle: `shared` names what other handles to the same database would
 * name alike (a file path, a server and database), or nothing for a private one (in memory).
 */
export function databaseIdentity(handle: object, shared: () => string | undefined): string {
  let identity = identities.get(handle);
  if (!identity) identities.set(handle, (identity = shared() ?? `private:${randomUUID()}`));
  return identity;
}

export function listenLocally(database: string, channel: string, onMessage: (payload: string) => void): Listener {
  const key = `${database}\u0000${channel}`;
  let set = subscribers.get(key);
  if (!set) subscribers.set(key, (set = new Set()));
  set.add(onMessage);
  return {
    close: async () => {
      set.delete(onMessage);
      if (set.size === 0 && subscribers.get(key) === set) subscribers.delete(key);
    },
  };
}

export function notifyLocally(database: string, channel: string, payload: string): void {
  const set = subscribers.get(`${database}\u0000${channel}`);
  if (!set || set.size === 0) return;
  // After the current turn: an enqueue inside the caller's synchronous transaction is
  // committed by then, so the woken claim can see the job.
  setImmediate(() => {
    for (const onMessage of [...set]) onMessage(payload);
  });
}
