import { describe, expect, it } from "vitest";
import { inCI, needsService, skipNotice } from "../src/optional.js";

/** needsService with its printing captured. */
function decide(available: boolean, env: NodeJS.ProcessEnv): { runs: boolean; printed: string[] } {
  const printed: string[] = [];
  const runs = needsService(available, skipNotice("pgbouncer is not installed", "the PgBouncer tests are skipped", "apt-get install pgbouncer"), env, (line) =>
    printed.push(line),
  );
  return { runs, printed };
}

describe("a test that needs a service: skipped with a notice outside CI, required in CI", () => {
  it("runs when the service is there, in CI or not, and prints nothing", () => {
    expect(decide(true, {})).toEqual({ runs: true, printed: [] });
    expect(decide(true, { CI: "true" })).toEqual({ runs: true, printed: [] });
  });

  it("outside CI, a missing service skips the test with one line saying what is missing and how to get it", () => {
    const { runs, printed } = decide(false, {});
    expect(runs).toBe(false);
    expect(printed).toEqual(["forge tests: pgbouncer is not installed; the PgBouncer tests are skipped (apt-get install pgbouncer)"]);
    expect(printed[0]).not.toContain("\n");
  });

  it("in CI, a missing service does not skip the test: it runs, and fails on its own, with no notice", () => {
    expect(decide(false, { CI: "true" })).toEqual({ runs: true, printed: [] });
  });

  it("only CI=true (what .ci/run exports) is CI", () => {
    expect(inCI({ CI: "true" })).toBe(true);
    for (const env of [{}, { CI: "" }, { CI: "false" }, { CI: "1" }]) {
      expect(inCI(env)).toBe(false);
      expect(decide(false, env).runs).toBe(false);
    }
  });

  it("reads the process's environment by default", () => {
    const before = process.env.CI;
    try {
      process.env.CI = "true";
      expect(needsService(false, "unused", undefined, () => expect.unreachable("no notice in CI"))).toBe(true);
      delete process.env.CI;
      const printed: string[] = [];
      expect(needsService(false, "forge tests: x is missing; y is skipped (install x)", undefined, (line) => printed.push(line))).toBe(false);
      expect(printed).toEqual(["forge tests: x is missing; y is skipped (install x)"]);
    } finally {
      if (before === undefined) delete process.env.CI;
      else process.env.CI = before;
    }
  });
});
