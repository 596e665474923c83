import { expect } from "vitest";
import { JobError, statusCounts, type JobsDatabase } from "../../../src/index.js";
import type { TestDatabase } from "../../helpers/backends.js";

/** One number from a `SELECT count(*) AS n …` (any backend returns it as a number, a bigint or a string). */
export async function count(t: TestDatabase, text: string, params: unknown[] = []): Promise<number> {
  const rows = await t.sql<{ n: number | string }>(text, params);
  return Number(rows[0]?.n ?? 0);
}

/** Jobs, live and ended: the "nothing half-written" checks compare it before and after. */
export function jobRows(t: TestDatabase): Promise<number> {
  return count(t, "SELECT count(*) AS n FROM {all}");
}

/** Jobs of `queue` that have reached a final state. */
export function finished(t: TestDatabase, queue: string): Promise<number> {
  return count(t, "SELECT count(*) AS n FROM {all} WHERE queue = $1 AND status IN ('done', 'failed', 'cancelled')", [queue]);
}

/** Nothing pending and nothing running left in `queue`: the end state of every soak. */
export async function expectSettled(db: JobsDatabase, queue: string, total: number): Promise<void> {
  const [status] = await statusCounts({ db, queue });
  expect(status).toMatchObject({ queue, total, counts: expect.objectContaining({ pending: 0, running: 0 }) });
}

/** Runs `fn` and returns what it threw; fails if it did not throw or threw something other than `type`. */
export async function rejection<E extends Error = JobError>(fn: () => Promise<unknown>, type: new (...args: never[]) => E = JobError as never): Promise<E> {
  let value: unknown;
  try {
    value = await fn();
  } catch (error) {
    expect(error).toBeInstanceOf(type);
    return error as E;
  }
  throw new Error(`expected a ${type.name}, got a result: ${JSON.stringify(value)}`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
