import type { JobsDatabase } from "../core/database.js";
import type { Executor } from "../db/executor.js";
import { isLockConflict } from "../core/sql-errors.js";
import { delay, retrying, type Backoff } from "../base/retry.js";
import { ENDED_STATUSES, moveEnded } from "../run/ended.js";
import { uncountLive } from "./uncount.js";
import { ensurePartitions, listPartitions } from "./partitions.js";

/**
 * The online upgrade to the live-only jobs table (issue 33.5). A database migrated from a
 * version that kept ended jobs in the jobs table still holds them there ("legacy rows") after
 * migrations 14 and 15: reads find them in either table and the counts include them, so nothing
 * is wrong meanwhile, but the live table stays as big as before. This moves them into history
 * in batches, each its own short transaction over rows it locked (SKIP LOCKED, so workers never
 * wait on the mover, nor the mover on them), oldest first. A batch commits whole or not at all:
 * killed at any point, every row is in exactly one table, and a rerun carries on.
 */

/** Rows per transaction when the caller does not say. */
export const UPGRADE_BATCH = 1000;
/** Tries per batch that lost on locks (deadlock, lock timeout, busy file) before the error is the caller's. */
const LOCK_TRIES = 10;
const LOCK_BACKOFF: Backoff = { firstMs: 50, maxMs: 2000, jitter: true };
/** How long a batch's statements wait for a lock on PostgreSQL before the batch is tried again. */
const LOCK_TIMEOUT = "5s";
/** MariaDB: seconds an upgrader that waits for its turn waits on the named lock before trying again. */
const TURN_WAIT_SECONDS = 30;

export interface UpgradeOptions {
  /** Rows moved per transaction (default 1,000). */
  batchSize?: number;
  /** Milliseconds to pause between batches (default 0): a background upgrader leaves the database to the workers. */
  pauseMs?: number | ((batchMs: number) => number);
  /**
   * One upgrader at a time, per batch (PostgreSQL advisory lock, MariaDB GET_LOCK; SQLite has
   * one writer anyway): "wait" waits for its turn (the CLI), "skip" gives up the pass when
   * another upgrader holds it (a worker: the other one is doing the work). Default "wait".
   */
  turn?: "wait" | "skip";
  /** Checked between batches: false stops the pass (the rows left stay for the next one). */
  active?: () => boolean;
  /** After each committed batch, with the rows moved so far by this call. */
  onBatch?: (moved: number) => void;
}

export interface UpgradeResult {
  /** Ended jobs this call moved into history. */
  moved: number;
  /** Ended jobs still in the live table afterwards (rows locked by others at the time, or a pass stopped early). */
  remaining: number;
  /** The pass gave way to another upgrader holding the turn (`turn: "skip"`). */
  gaveWay: boolean;
}

/** PostgreSQL's history partitions known to exist, by UTC day (null until first read). */
interface ReadyDays {
  known: Set<string> | null;
}

/** Ended jobs still in the live table, which the upgrade has yet to move (what `forge-jobs doctor` reports). */
export async function legacyEndedCount(db: JobsDatabase): Promise<number> {
  const { rows } = await db.executor.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${db.table} WHERE status IN ${ENDED_STATUSES}`);
  return Number(rows[0]?.n ?? 0);
}

/**
 * Moves the legacy rows into history, `batchSize` at a time, until none is left (or `active`
 * says stop); returns what it moved and what remains. Each batch, in one transaction: takes
 * the upgrader's turn, locks the next rows by id (SKIP LOCKED), takes them out of the counts
 * (uncountLive: history's triggers count them again as they arrive), moves them (moveEnded).
 * A batch that lost on locks is run again; any other error is the caller's, with every batch
 * before it committed and the failed one rolled back whole.
 */
export async function upgradeFinished(db: JobsDatabase, options: UpgradeOptions = {}): Promise<UpgradeResult> {
  const size = options.batchSize ?? UPGRADE_BATCH;
  if (!(Number.isInteger(size) && size >= 1)) throw new RangeError(`batchSize must be a whole number of at least 1, got ${size}`);
  // None left (every worker's first look once the upgrade is done): no window is read.
  if ((await legacyEndedCount(db)) === 0) return { moved: 0, remaining: 0, gaveWay: false };
  // PostgreSQL: the days history has a partition for, read when a batch first needs them.
  const ready: ReadyDays | null = db.dialect === "postgres" ? { known: null } : null;
  let moved = 0;
  let after = 0;
  let gaveWay = false;
  while (options.active?.() ?? true) {
    const started = performance.now();
    const batch = await retrying(() => moveOneBatch(db, size, after, options.turn ?? "wait", ready), {
      backoff: LOCK_BACKOFF,
      giveUp: (failures, error) => !isLockConflict(error, db.dialect) || failures >= LOCK_TRIES,
    });
    if (batch === "gave way") {
      gaveWay = true;
      break;
    }
    if (batch === null) break;
    moved += batch.moved;
    after = batch.last;
    options.onBatch?.(moved);
    const pause = typeof options.pauseMs === "function" ? options.pauseMs(performance.now() - started) : (options.pauseMs ?? 0);
    if (pause > 0) await delay(pause);
  }
  return { moved, remaining: await legacyEndedCount(db), gaveWay };
}

/** The next `size` rows of the live table past `after`, by id: the legacy ones among them and the last id. */
interface Window {
  legacy: number[];
  /** PostgreSQL: the UTC days the legacy ones ended on. */
  days: string[];
  last: number;
}

/**
 * One batch: the rows it moved and the last id of its window; null when the live table has no
 * row past `after`. The batch is a window of the primary key, read with no condition but the
 * id: a plan no missing statistic can turn into a scan of every legacy row per batch (the
 * status test alone matches a million rows in a partial index, in the wrong order), so every
 * batch costs the same however many are left.
 */
async function moveOneBatch(
  db: JobsDatabase,
  size: number,
  after: number,
  turn: "wait" | "skip",
  ready: ReadyDays | null,
): Promise<{ moved: number; last: number } | "gave way" | null> {
  // Read first, outside any transaction: a window of live jobs only takes no write lock
  // (SQLite's whole file); on PostgreSQL the days the batch will touch get their partitions
  // here, since making one inside the moving transaction would hold its row locks while
  // waiting for every reader of history.
  const window = await nextWindow(db, size, after);
  if (window === null) return null;
  if (window.legacy.length === 0) return { moved: 0, last: window.last };
  let days = window.days;
  for (;;) {
    if (ready) await makeReady(db, ready, days);
    const outcome = await db.executor.transaction((tx) => withTurn(db, tx, turn, () => moveLocked(db, tx, window.legacy, ready)));
    if (outcome === "gave way") return outcome;
    // A row of a day not made ready (its finish time changed since the read): nothing moved;
    // its day is made ready and the batch runs again.
    if (Array.isArray(outcome)) days = outcome;
    else return { moved: outcome, last: window.last };
  }
}

/** PostgreSQL: history has a partition for each of `days` (made here when missing). */
async function makeReady(db: JobsDatabase, ready: ReadyDays, days: readonly string[]): Promise<void> {
  const known = (ready.known ??= new Set((await listPartitions(db)).map((p) => p.day)));
  const missing = days.filter((day) => !known.has(day));
  if (missing.length === 0) return;
  await ensurePartitions(db, missing);
  for (const day of missing) known.add(day);
}

/** The window of the live table after `after` (null: no row past it). */
async function nextWindow(db: JobsDatabase, size: number, after: number): Promise<Window | null> {
  const day = db.dialect === "postgres" ? "to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')" : "NULL";
  const { rows } = await db.executor.query<{ id: number | string; legacy: number | string | boolean; day: string | null }>(
    `SELECT id, CASE WHEN status IN ${ENDED_STATUSES} THEN 1 ELSE 0 END AS legacy, ${day} AS day FROM ${db.table} WHERE id > $1 ORDER BY id LIMIT $2`,
    [after, size],
  );
  if (rows.length === 0) return null;
  const legacy = rows.filter((r) => Number(r.legacy) === 1);
  const days = new Set(legacy.flatMap((r) => (r.day === null ? [] : [r.day])));
  return { legacy: legacy.map((r) => Number(r.id)), days: [...days], last: Number(rows.at(-1)!.id) };
}

/**
 * The batch itself, in its transaction: locks the legacy rows of the window that are still
 * there and still ended (SKIP LOCKED: a row someone else holds, a retry of it say, is left for
 * the next pass), takes them out of the counts, moves them; returns how many. PostgreSQL leaves
 * out rows without a finish time: history's partitions are by finished_at and none takes them
 * (no version of the queue wrote an ended job without one; `remaining` counts them).
 */
async function moveLocked(db: JobsDatabase, tx: Executor, candidates: readonly number[], ready: ReadyDays | null): Promise<number | string[]> {
  const which = `${db.sql.inList("id", "$1")} AND status IN ${ENDED_STATUSES}`;
  let ids: number[];
  if (db.dialect === "postgres") {
    await tx.query(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
    const { rows } = await tx.query<{ id: number | string; day: string }>(
      `SELECT id, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM ${db.table}
       WHERE ${which} AND finished_at IS NOT NULL ORDER BY id FOR UPDATE SKIP LOCKED`,
      [candidates],
    );
    const notReady = rows.filter((r) => !ready?.known?.has(r.day)).map((r) => r.day);
    if (notReady.length > 0) return [...new Set(notReady)];
    ids = rows.map((r) => Number(r.id));
  } else {
    // SQLite has one writer, whose write transaction this is: nothing to lock or skip.
    const lock = db.dialect === "mysql" ? " FOR UPDATE SKIP LOCKED" : "";
    const { rows } = await tx.query<{ id: number | string }>(`SELECT id FROM ${db.table} WHERE ${which} ORDER BY id${lock}`, [candidates]);
    ids = rows.map((r) => Number(r.id));
  }
  if (ids.length === 0) return 0;
  await uncountLive(db, tx, ids);
  await moveEnded(db, tx, ids);
  return ids.length;
}

/**
 * Runs `work` holding the upgrader's turn for this transaction: PostgreSQL's transaction-scoped
 * advisory lock, MariaDB's named lock (a session's: released here, whatever `work` did; a
 * connection that died released it with itself). SQLite's write transaction is the turn.
 */
async function withTurn<T>(db: JobsDatabase, tx: Executor, turn: "wait" | "skip", work: () => Promise<T>): Promise<T | "gave way"> {
  const name = `forge_jobs_upgrade:${db.schema ?? ""}`;
  if (db.dialect === "postgres") {
    if (turn === "wait") await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [name]);
    else {
      const { rows } = await tx.query<{ got: boolean }>("SELECT pg_try_advisory_xact_lock(hashtext($1)) AS got", [name]);
      if (!rows[0]?.got) return "gave way";
    }
    return work();
  }
  if (db.dialect === "mysql") {
    // GET_LOCK names are the server's: the database's name keeps two queues' upgrades apart.
    for (;;) {
      const { rows } = await tx.query<{ got: number | string | null }>("SELECT GET_LOCK(CONCAT($1, COALESCE($2, DATABASE())), $3) AS got", [
        "forge_jobs_upgrade:",
        db.schema,
        turn === "wait" ? TURN_WAIT_SECONDS : 0,
      ]);
      if (Number(rows[0]?.got) === 1) break;
      if (turn === "skip") return "gave way";
    }
    try {
      return await work();
    } finally {
      await tx.query("SELECT RELEASE_LOCK(CONCAT($1, COALESCE($2, DATABASE())))", ["forge_jobs_upgrade:", db.schema]).catch(() => undefined);
    }
  }
  return work();
}
