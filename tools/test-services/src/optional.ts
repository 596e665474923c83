// A test that needs something beyond Node and SQLite (a database server, PgBouncer, Patroni,
// Chromium) follows the rule of setup.ts: outside CI, when that thing is missing, the test is
// skipped with one line saying what is missing, what is skipped and how to get it; in CI
// (CI=true) .ci/run provides everything, so the test runs and a missing service fails it.

/** Whether this is a CI run (.ci/run exports CI=true): nothing is skipped there. */
export function inCI(env: NodeJS.ProcessEnv): boolean {
  return env.CI === "true";
}

/** The one-line notice, in the suite's words: `forge tests: <missing>; <skipped> (<fix>)`. */
export function skipNotice(missing: string, skipped: string, fix: string): string {
  return `forge tests: ${missing}; ${skipped} (${fix})`;
}

/**
 * Whether a test that needs a service runs: when the service is there, and always in CI, where
 * its absence must fail the test rather than skip it. When the test is skipped, `notice` is
 * printed (through `warn`), once per call. For `describe.runIf` / `it.runIf`.
 */
export function needsService(available: boolean, notice: string, env: NodeJS.ProcessEnv = process.env, warn: (line: string) => void = console.warn): boolean {
  if (available || inCI(env)) return true;
  warn(notice);
  return false;
}
