import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, JobError, listSchedules, PRUNE_TASK, processOne, RECLAIM_TASK, scheduleMaintenance } from "../src/index.js";
import { runDueSchedules } from "../src/schedules/scheduler.js";
import { backends, type TestDatabase } from "./helpers/backends.js";
import { recount } from "./helpers/legacy-rows.js";

describe.each(backends())("the queue's own maintenance as schedules ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("declares prune and reclaim schedules that any worker runs without a handler of its own; left out, they are removed", async () => {
    expect(await scheduleMaintenance({ prune: { olderThan: 3600 }, reclaim: {}, queue: "upkeep", db: t.db })).toEqual({
      [PRUNE_TASK]: "created",
      [RECLAIM_TASK]: "created",
    });
    expect(await scheduleMaintenance({ prune: { olderThan: 3600 }, reclaim: {}, queue: "upkeep", db: t.db })).toEqual({
      [PRUNE_TASK]: "unchanged",
      [RECLAIM_TASK]: "unchanged",
    });
    const schedules = await listSchedules({ db: t.db });
    expect(schedules.map((s) => [s.name, s.cron, s.queue])).toEqual([
      [PRUNE_TASK, "@hourly", "upkeep"],
      [RECLAIM_TASK, "* * * * *", "upkeep"],
    ]);

    // A job finished two hours ago, one just now (legacy ended rows of the live table, counted
    // as an upgraded database counts them), and one whose worker vanished.
    const old = await enqueue("work", null, { db: t.db, queue: "other" });
    const recent = await enqueue("work", null, { db: t.db, queue: "other" });
    await t.sql(`UPDATE {jobs} SET status = 'done', finished_at = ${t.db.sql.nowPlus("7200", "-")} WHERE id = $1`, [old]);
    await t.sql(`UPDATE {jobs} SET status = 'done', finished_at = ${t.db.sql.now} WHERE id = $1`, [recent]);
    await recount(t);
    const lost = await enqueue("work", null, { db: t.db, queue: "other", maxAttempts: 3 });
    await t.sql(`UPDATE {jobs} SET status = 'running', attempts = 1, claim_token = $1, locked_until = ${t.db.sql.nowPlus("60", "-")} WHERE id = $2`, [
      randomUUID(),
      lost,
    ]);

    // The scheduler finds both due (their next slot is within the hour: look an hour ahead).
    await runDueSchedules(t.db, { now: new Date(Date.now() + 3_600_000) });
    expect(await processOne({}, { db: t.db, queue: "upkeep" })).toBe(true);
    expect(await processOne({}, { db: t.db, queue: "upkeep" })).toBe(true);
    expect(await getJob(old, { db: t.db })).toBeNull();
    expect((await getJob(recent, { db: t.db }))!.status).toBe("done");
    expect((await getJob(lost, { db: t.db }))!.status).toBe("pending");
    const results = await t.sql<{ task: string; status: string }>("SELECT task, status FROM {all} WHERE queue = 'upkeep' ORDER BY task");
    expect(results).toEqual([
      { task: PRUNE_TASK, status: "done" },
      { task: RECLAIM_TASK, status: "done" },
    ]);

    expect(await scheduleMaintenance({ db: t.db })).toEqual({ [PRUNE_TASK]: "removed", [RECLAIM_TASK]: "removed" });
    expect(await listSchedules({ db: t.db })).toEqual([]);
  });

  it("refuses bad settings with a JobError and writes nothing", async () => {
    for (const options of [
      { prune: { olderThan: 60 }, reclaim: { lease: -1 } },
      { prune: { olderThan: -1 } },
      { prune: { olderThan: 60, every: "1h" } },
      { prune: { olderThan: 60, batchSize: 0 } },
      { reclaim: "yes" },
      { pruneAfter: 60 },
    ]) {
      await expect(scheduleMaintenance({ ...options, db: t.db } as never)).rejects.toBeInstanceOf(JobError);
    }
    expect(await listSchedules({ db: t.db })).toEqual([]);
  });

  it("passes batchSize to the scheduled prune", async () => {
    await scheduleMaintenance({ prune: { olderThan: 60, statuses: ["done"], batchSize: 500 }, queue: "upkeep", db: t.db });
    const [row] = await t.sql<{ payload: unknown }>(`SELECT payload FROM ${t.db.schedulesTable} WHERE name = $1`, [PRUNE_TASK]);
    expect(typeof row!.payload === "string" ? JSON.parse(row!.payload) : row!.payload).toEqual({ olderThan: 60, statuses: ["done"], batchSize: 500 });
    await scheduleMaintenance({ db: t.db });
  });
});
