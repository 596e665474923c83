import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { CsvJobError } from "../../src/index.js";

/** Awaits a promise that must reject, and returns what it rejected with. */
export async function rejection(promise: Promise<unknown>): Promise<Error & { retryable?: unknown }> {
  try {
    await promise;
  } catch (error) {
    return error as Error & { retryable?: unknown };
  }
  throw new Error("expected a rejection, got a result");
}

export async function withTempDir<T>(use: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(tmpdir(), "forge-ie-"));
  try {
    return await use(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** What a handler throws when the queue says the job is no longer this worker's. */
export function expectTakenOver(error: Error & { retryable?: unknown }): void {
  expect(error).toBeInstanceOf(CsvJobError);
  expect(error.message).toMatch(/taken over/);
  expect(error.retryable).toBe(true);
}
