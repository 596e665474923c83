import type { JobsDatabase } from "./database.js";
import { JobError } from "../base/errors.js";

/** Room kept in a statement for its SQL, ids, tokens and framing, next to the large values. */
const STATEMENT_OVERHEAD = 64 * 1024;
/** Below this, a value fits any MariaDB server anyone runs: no need to ask the server. */
const ALWAYS_FITS = 64 * 1024;

/** Keyed by the driver object (a pool, or an application's connection): the setting is the server's. */
const budgets = new WeakMap<object, Promise<number>>();

/**
 * Bytes of values one statement may carry. MariaDB refuses (and then closes the connection
 * of) a statement longer than its `max_allowed_packet`, read from the server once per pool or
 * connection; the other backends take any size the queue's own limits let through.
 */
export function statementBudget(db: JobsDatabase): Promise<number> {
  if (db.dialect !== "mysql") return Promise.resolve(Infinity);
  const key = (db.executor.raw ?? db.executor) as object;
  let budget = budgets.get(key);
  if (!budget) {
    budget = db.executor
      .query<{ packet: number | string }>("SELECT @@max_allowed_packet AS packet")
      .then(({ rows }) => Math.max(1024, Number(rows[0]?.packet) - STATEMENT_OVERHEAD));
    budget.catch(() => budgets.delete(key));
    budgets.set(key, budget);
  }
  return budget;
}

/** The packet as the server states it, for messages. */
export function packetFromBudget(budget: number): number {
  return budget + STATEMENT_OVERHEAD;
}

/**
 * Bytes `text` takes inside a MariaDB statement: mysql2 quotes each string and escapes NUL,
 * \b, \t, \n, \r, Ctrl-Z, both quotes and the backslash, one byte more each.
 */
export function quotedBytes(text: string): number {
  let escapes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 || c === 39 || c === 92 || c === 0 || c === 8 || c === 9 || c === 10 || c === 13 || c === 26) escapes++;
  }
  return Buffer.byteLength(text) + escapes + 2;
}

/** False when `text` certainly fits one statement; checked before anything is awaited, as results are on the worker's hot path. */
export function mayOverflowStatement(db: JobsDatabase, text: string): boolean {
  // Three bytes per UTF-16 unit at most, escapes included.
  return db.dialect === "mysql" && text.length * 3 + 2 >= ALWAYS_FITS;
}

/**
 * The quoted size of `text` when one statement cannot carry it, else null. Asks the server
 * only for a value large enough to matter.
 */
export async function overStatementBudget(db: JobsDatabase, text: string): Promise<{ bytes: number; packet: number } | null> {
  if (!mayOverflowStatement(db, text)) return null;
  const budget = await statementBudget(db);
  const bytes = quotedBytes(text);
  return bytes > budget ? { bytes, packet: packetFromBudget(budget) } : null;
}

/** Refuses a payload that no INSERT could carry to the server: a JobError, nothing written. */
export async function checkPayloadsFit(db: JobsDatabase, payloads: readonly (string | null)[], field: (index: number) => string): Promise<void> {
  if (db.dialect !== "mysql") return;
  for (let i = 0; i < payloads.length; i++) {
    const payload = payloads[i];
    if (!payload) continue;
    const over = await overStatementBudget(db, payload);
    if (over) {
      throw new JobError(
        `${field(i)} takes ${over.bytes} bytes in an INSERT, more than the MariaDB server's max_allowed_packet (${over.packet} bytes) lets through; store large data elsewhere and pass a reference, or raise max_allowed_packet on the server`,
        field(i),
      );
    }
  }
}
