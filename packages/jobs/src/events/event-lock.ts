import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { qualified } from "../db/identifiers.js";
import { EVENT_LOCKS_TABLE, EVENTS_TABLE, WAITS_TABLE } from "../migrations/events.js";

/** What a wait matches on, and an event carries: its name, key and tenant ('' for none). */
export interface EventMatch {
  event: string;
  key: string;
  tenant: string;
}

/**
 * MariaDB's lock slots: (event, key, tenant) hashes into one of these rows. Unrelated keys that
 * share a slot only wait on each other for one short transaction; the ring never grows.
 */
const LOCK_SLOTS = 1024;
/** PostgreSQL advisory locks' first key, so ours never meet an application's one-key locks. */
const ADVISORY_CLASS = 0x46_4a_45_56; // "FJEV"

export interface EventTables {
  events: string;
  waits: string;
  locks: string;
}

const tables = new WeakMap<JobsDatabase, EventTables>();

/** The quoted, qualified events, waits and (MariaDB) lock tables of `db`. */
export function eventTables(db: JobsDatabase): EventTables {
  let found = tables.get(db);
  if (found === undefined) {
    const name = (table: string) => qualified(db.dialect, db.schema, table);
    found = { events: name(EVENTS_TABLE), waits: name(WAITS_TABLE), locks: name(EVENT_LOCKS_TABLE) };
    tables.set(db, found);
  }
  return found;
}

/** FNV-1a over the three parts (each ended by NUL, which none may hold): a signed 32-bit integer. */
function hashOf(match: EventMatch): number {
  let hash = 0x811c9dc5;
  for (const part of [match.event, match.key, match.tenant]) {
    for (const char of `${part}\u0000`) {
      hash ^= char.codePointAt(0)!;
      hash = Math.imul(hash, 0x01000193);
    }
  }
  return hash | 0;
}

/**
 * Takes the lock of one (event, key, tenant) until `tx` ends. A wait is registered, and an
 * event delivered, under it: without it a wait could look for the event while the event's
 * transaction looked for waits, each missing the other's uncommitted row, and the job wait
 * forever. PostgreSQL: a transaction-scoped advisory lock. MariaDB: an upsert of a row of the
 * lock ring (it locks the row until commit). SQLite: its transactions hold its one write lock.
 */
export async function lockEvent(db: JobsDatabase, tx: Executor, match: EventMatch): Promise<void> {
  const hash = hashOf(match);
  if (db.dialect === "postgres") await tx.query(`SELECT pg_advisory_xact_lock($1::int4, $2::int4)::text AS locked`, [ADVISORY_CLASS, hash]);
  else if (db.dialect === "mysql") {
    const slot = ((hash % LOCK_SLOTS) + LOCK_SLOTS) % LOCK_SLOTS;
    await tx.query(`INSERT INTO ${eventTables(db).locks} (slot) VALUES ($1) ON DUPLICATE KEY UPDATE slot = slot`, [slot]);
  }
}
