import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobError, listSchedules, schedule, syncSchedules } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

// Issue 31.7: input that used to be stored and then did nothing (or the wrong thing) is refused
// up front with an error that says what to fix, and nothing is written.

/** The JobError `fn` throws (the test fails if it resolves). */
async function refusal(fn: () => Promise<unknown>): Promise<JobError> {
  const error = await fn().then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(JobError);
  return error as JobError;
}

describe.each(backends())("refused input writes nothing ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("a cron expression with no slot ever (February 30) is refused by schedule and syncSchedules", async () => {
    for (const cron of ["0 0 30 2 *", "0 0 31 4,6 *"]) {
      const error = await refusal(() => schedule("never", cron, { task: "report", db: t.db }));
      expect(error.message).toContain(`cron ${JSON.stringify(cron)} has no slot`);
      expect(error.field).toBe("cron");
      await refusal(() => syncSchedules([{ name: "never", cron, task: "report" }], { db: t.db }));
    }
    expect(await listSchedules({ db: t.db })).toEqual([]);
    // February 29 comes back within 8 years even across 2100 (no leap day): it stays accepted.
    expect(await schedule("leap", "0 0 29 2 *", { task: "report", db: t.db })).toBe("created");
    expect((await listSchedules({ db: t.db })).map((s) => s.name)).toEqual(["leap"]);
  });
});
