import type { DialectName } from "../db/executor.js";
import type { Migration, SchemaNames } from "./types.js";

/** Events sent by `sendEvent`, kept for a bounded time (prune) so a later wait of a job enqueued before them still gets them. */
export const EVENTS_TABLE = "jobs_events";
/** The jobs waiting now in `ctx.waitForEvent` (or `ctx.invoke`): one row per waiting job. */
export const WAITS_TABLE = "jobs_waits";
/** MariaDB's per-(event, key, tenant) lock: a fixed ring of rows, locked by an upsert (events/event-lock.ts). */
export const EVENT_LOCKS_TABLE = "jobs_event_locks";

/**
 * Migration 20: events and waits (events/, run/wait-event.ts). `tenant` is '' for none, so
 * that equality matches "no tenant" with "no tenant" and an index serves it. An event's `data`
 * is its JSON text, NULL for null. A wait's `timeout_at` is when it gives up (NULL: never);
 * `child_id` is the job an `invoke` waits for (its event columns are then '').
 */
const statements: Record<DialectName, (names: SchemaNames) => string[]> = {
  postgres: ({ named, index }) => [
    `CREATE TABLE IF NOT EXISTS ${named(EVENTS_TABLE)} (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name text NOT NULL,
      event_key text NOT NULL,
      tenant text NOT NULL,
      data text,
      created_at timestamptz NOT NULL DEFAULT now()
    )`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_events_match")} ON ${named(EVENTS_TABLE)} (name, event_key, tenant, created_at)`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_events_age")} ON ${named(EVENTS_TABLE)} (created_at)`,
    `CREATE TABLE IF NOT EXISTS ${named(WAITS_TABLE)} (
      job_id bigint PRIMARY KEY,
      step text NOT NULL,
      event text NOT NULL,
      event_key text NOT NULL,
      tenant text NOT NULL,
      child_id bigint,
      timeout_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_waits_match")} ON ${named(WAITS_TABLE)} (event, event_key, tenant)`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_waits_timeout")} ON ${named(WAITS_TABLE)} (timeout_at) WHERE timeout_at IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_waits_child")} ON ${named(WAITS_TABLE)} (child_id) WHERE child_id IS NOT NULL`,
  ],
  sqlite: ({ named, index }) => [
    `CREATE TABLE IF NOT EXISTS ${named(EVENTS_TABLE)} (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL,
      event_key TEXT NOT NULL,
      tenant TEXT NOT NULL,
      data TEXT,
      created_at INTEGER NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_events_match")} ON "${EVENTS_TABLE}" (name, event_key, tenant, created_at)`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_events_age")} ON "${EVENTS_TABLE}" (created_at)`,
    `CREATE TABLE IF NOT EXISTS ${named(WAITS_TABLE)} (
      job_id INTEGER PRIMARY KEY,
      step TEXT NOT NULL,
      event TEXT NOT NULL,
      event_key TEXT NOT NULL,
      tenant TEXT NOT NULL,
      child_id INTEGER,
      timeout_at INTEGER,
      created_at INTEGER NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_waits_match")} ON "${WAITS_TABLE}" (event, event_key, tenant)`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_waits_timeout")} ON "${WAITS_TABLE}" (timeout_at) WHERE timeout_at IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS ${index("jobs_waits_child")} ON "${WAITS_TABLE}" (child_id) WHERE child_id IS NOT NULL`,
  ],
  mysql: ({ named }) => [
    `CREATE TABLE IF NOT EXISTS ${named(EVENTS_TABLE)} (
      id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
      name VARCHAR(255) NOT NULL,
      event_key VARCHAR(255) NOT NULL,
      tenant VARCHAR(255) NOT NULL,
      data LONGTEXT,
      created_at DATETIME(6) NOT NULL,
      KEY jobs_events_match (name, event_key, tenant, created_at),
      KEY jobs_events_age (created_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
    `CREATE TABLE IF NOT EXISTS ${named(WAITS_TABLE)} (
      job_id BIGINT NOT NULL PRIMARY KEY,
      step VARCHAR(255) NOT NULL,
      event VARCHAR(255) NOT NULL,
      event_key VARCHAR(255) NOT NULL,
      tenant VARCHAR(255) NOT NULL,
      child_id BIGINT,
      timeout_at DATETIME(6),
      created_at DATETIME(6) NOT NULL,
      KEY jobs_waits_match (event, event_key, tenant),
      KEY jobs_waits_timeout (timeout_at),
      KEY jobs_waits_child (child_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin`,
    `CREATE TABLE IF NOT EXISTS ${named(EVENT_LOCKS_TABLE)} (slot INT NOT NULL PRIMARY KEY) ENGINE=InnoDB`,
  ],
};

/** Migration 20 for `dialect`. */
export function eventWaits(dialect: DialectName): Migration {
  return { version: 20, name: "event_waits", statements: statements[dialect] };
}
