import { AsyncLocalStorage } from "node:async_hooks";
import { Turns } from "./turns.js";

/**
 * A single connection the application lends the queue (a pg client, a mysql2 connection), as
 * opposed to one the queue took from a pool and opened a transaction on itself. It may or may
 * not be inside the application's own transaction. `transaction()` on it must still be one
 * transaction — a checkpoint is the handler's writes and the progress together or not at all:
 * BEGIN … COMMIT when the connection is idle, a savepoint inside the caller's transaction (a
 * failed or fenced step undoes only itself; committing stays the caller's decision).
 */
export interface LentConnection {
  /** Opens the transaction: a real one when the connection is idle, else a savepoint (`SAVEPOINT_NAME`). */
  begin(readOnly: boolean): Promise<"transaction" | "savepoint">;
  run(sql: string): Promise<unknown>;
}

export const SAVEPOINT_NAME = "forge_jobs_step";

/**
 * Whose turn it is on each lent connection. While one of our transactions is open on it,
 * statements from other async flows of the queue (processOne's lease extension, running on a
 * timer) wait for it to end instead of landing inside it; statements from inside it (the
 * transaction's own work, a checkpoint's `work(tx)`) run at once.
 */
const turns = new WeakMap<object, Turns>();
/** The connections whose transaction the current async flow is inside of. */
const inside = new AsyncLocalStorage<ReadonlySet<object>>();

function turnsOf(connection: object): Turns {
  let found = turns.get(connection);
  if (!found) turns.set(connection, (found = new Turns()));
  return found;
}

function isInside(connection: object): boolean {
  return inside.getStore()?.has(connection) ?? false;
}

/** One statement on a lent connection: at once, unless another flow's transaction holds it. */
export function statementOn<T>(connection: object, statement: () => Promise<T>): Promise<T> {
  const state = turnsOf(connection);
  if (!state.held || isInside(connection)) return statement();
  return state.acquire().then(async (release) => {
    try {
      return await statement();
    } finally {
      release();
    }
  });
}

/** `fn` in one transaction on a lent connection (see LentConnection); nested calls run inside it. */
export async function transactionOn<T>(connection: object, lent: LentConnection, fn: () => Promise<T>, readOnly: boolean): Promise<T> {
  if (isInside(connection)) return fn();
  const release = await turnsOf(connection).acquire();
  try {
    const kind = await lent.begin(readOnly);
    const within = new Set(inside.getStore() ?? []).add(connection);
    let result: T;
    try {
      result = await inside.run(within, fn);
    } catch (error) {
      // A connection that cannot roll back is broken; the work's own error says more.
      await undo(lent, kind).catch(() => undefined);
      throw error;
    }
    await lent.run(kind === "transaction" ? "COMMIT" : `RELEASE SAVEPOINT ${SAVEPOINT_NAME}`);
    return result;
  } finally {
    release();
  }
}

async function undo(lent: LentConnection, kind: "transaction" | "savepoint"): Promise<void> {
  if (kind === "transaction") {
    await lent.run("ROLLBACK");
    return;
  }
  await lent.run(`ROLLBACK TO SAVEPOINT ${SAVEPOINT_NAME}`);
  await lent.run(`RELEASE SAVEPOINT ${SAVEPOINT_NAME}`);
}
