import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  enqueue,
  enqueueMany,
  getJob,
  JobError,
  listLimits,
  listSchedules,
  schedule,
  setGroupWeight,
  setLimit,
  syncSchedules,
  triggerSchedule,
  unschedule,
} from "../src/index.js";
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
    await unschedule("leap", { db: t.db });
  });

  it("group, concurrencyKey, limit keys, group names and schedule names: at most 191 characters as the columns count them (an emoji is one)", async () => {
    // An emoji is 2 UTF-16 units and 4 bytes; MariaDB's utf8mb4 VARCHAR(191) holds 191 of them.
    const fits = "😀".repeat(191);
    const over = "😀".repeat(192);
    const [before] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {jobs}");

    const id = await enqueue("report", null, { db: t.db, group: fits, concurrencyKey: fits });
    expect(await getJob(id, { db: t.db })).toMatchObject({ group: fits, concurrencyKey: fits });
    const byTenant = await enqueue("report", null, { db: t.db, tenant: fits });
    expect(await getJob(byTenant, { db: t.db })).toMatchObject({ group: fits, tenant: fits });
    await setLimit(fits, { concurrency: 2 }, { db: t.db });
    expect((await listLimits({ db: t.db })).map((l) => l.key)).toContain(fits);
    await setGroupWeight(fits, 3, { db: t.db });
    expect(await schedule(fits, "0 3 * * *", { task: "report", db: t.db })).toBe("created");
    await unschedule(fits, { db: t.db });

    // One limit, one message naming it and its unit, wherever the check is.
    const tooLong = (field: string) =>
      new RegExp(`${field} must be at most 191 characters, got 192 \\(characters as the database counts them: Unicode code points, an emoji is one\\)`);
    for (const [fn, field] of [
      [() => enqueue("report", null, { db: t.db, group: over }), "group"],
      [() => enqueue("report", null, { db: t.db, concurrencyKey: over }), "concurrencyKey"],
      [() => enqueue("report", null, { db: t.db, tenant: over }), "tenant is the job's fair-share group and"],
      [() => setLimit(over, { concurrency: 2 }, { db: t.db }), "key"],
      [() => setGroupWeight(over, 3, { db: t.db }), "group"],
      [() => schedule(over, "0 3 * * *", { task: "report", db: t.db }), "name"],
    ] as const) {
      expect((await refusal(fn)).message).toMatch(tooLong(field));
    }
    const [after] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {jobs}");
    expect(Number(after!.n)).toBe(Number(before!.n) + 2);
    expect((await listLimits({ db: t.db })).map((l) => l.key)).not.toContain(over);
    expect(await listSchedules({ db: t.db })).toEqual([]);
  });

  it("dedup and idempotency keys starting with \"schedule:\" are the scheduler's: a job of the caller's with one is refused", async () => {
    await schedule("nightly", "0 3 * * *", { task: "report", db: t.db });
    const [before] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {jobs}");
    // A pending job holding "schedule:nightly" would make every slot of the schedule a skipped overlap.
    for (const [fn, field] of [
      [() => enqueue("report", null, { db: t.db, dedupKey: "schedule:nightly" }), "dedupKey"],
      [() => enqueueMany([{ task: "report" }, { task: "report", dedupKey: "schedule:nightly" }], { db: t.db }), "items[1].dedupKey"],
      [() => enqueue("report", null, { db: t.db, idempotencyKey: "schedule:nightly@2030-01-01T03:00:00.000Z" }), "idempotencyKey"],
    ] as const) {
      const error = await refusal(fn);
      expect(error.field).toBe(field);
      expect(error.message).toMatch(
        new RegExp(`^${field.replace(/[[\].]/g, "\\$&")} "schedule:nightly.*" starts with "schedule:", which is reserved for the runs of schedules`),
      );
    }
    const [after] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {jobs}");
    expect(Number(after!.n)).toBe(Number(before!.n));
    // The scheduler's own runs still carry them.
    const run = await triggerSchedule("nightly", { db: t.db });
    expect((await getJob(run, { db: t.db }))!.idempotencyKey).toMatch(/^schedule:nightly@/);
    await unschedule("nightly", { db: t.db });
  });
});
