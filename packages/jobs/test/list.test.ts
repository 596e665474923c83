import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, JobError, listJobs, processOne } from "../src/index.js";
import { backends, uniqueName, type TestDatabase } from "./helpers/backends.js";
import { mysql } from "../src/dialects/mysql.js";
import { postgres } from "../src/dialects/postgres.js";
import { sqlite } from "../src/dialects/sqlite.js";

/** SQL for "`seconds` ago" on the database's clock, in each backend's own time representation. */
const AGO = {
  postgres: (seconds: number) => postgres.nowPlus(String(seconds), "-"),
  sqlite: (seconds: number) => sqlite.nowPlus(String(seconds), "-"),
  mysql: (seconds: number) => mysql.nowPlus(String(seconds), "-"),
};

describe.each(backends())("listJobs ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("filters by queue, status, task and tenant, newest first, with the last error", async () => {
    const queue = uniqueName("list");
    const [a, b] = await enqueueMany(
      [
        { task: "report", tenant: "org-1" },
        { task: "mail", tenant: "org-2" },
      ],
      { db: t.db, queue },
    );
    const c = await enqueue("boom", null, { db: t.db, queue, tenant: "org-1" });
    expect((await listJobs({ db: t.db, queue })).jobs.map((j) => j.id)).toEqual([c, b, a]);
    const handlers = { boom: () => Promise.reject(new Error("kaput\nstack")), report: () => 1, mail: () => 1 };
    while (await processOne(handlers, { db: t.db, queue }));
    const failed = await listJobs({ db: t.db, queue, status: "failed" });
    expect(failed.jobs).toEqual([expect.objectContaining({ id: c, task: "boom", status: "failed", lastError: expect.stringContaining("kaput") as unknown })]);
    expect((await listJobs({ db: t.db, queue, status: "done" })).jobs.map((j) => j.id)).toEqual([b, a]);
    expect((await listJobs({ db: t.db, queue, task: "mail" })).jobs.map((j) => j.id)).toEqual([b]);
    expect((await listJobs({ db: t.db, queue, tenant: "org-1" })).jobs.map((j) => j.id)).toEqual([c, a]);
    expect((await listJobs({ db: t.db, queue, olderThan: 3600 })).jobs).toEqual([]);
  });

  it("olderThan keeps the jobs created at least that long ago, by the database's clock, and leaves the newer ones out", async () => {
    const queue = uniqueName("age");
    const [old, young, fresh] = await enqueueMany([{ task: "t" }, { task: "t" }, { task: "t" }], { db: t.db, queue });
    await t.sql(`UPDATE {jobs} SET created_at = ${AGO[backend.name](7200)} WHERE id = $1`, [old]);
    await t.sql(`UPDATE {jobs} SET created_at = ${AGO[backend.name](1200)} WHERE id = $1`, [young]);
    const olderThan = async (seconds: number) => (await listJobs({ db: t.db, queue, olderThan: seconds })).jobs.map((j) => j.id);
    expect(await olderThan(3600)).toEqual([old]);
    expect(await olderThan(600)).toEqual([young, old]);
    expect(await olderThan(3 * 3600)).toEqual([]);
    expect(await olderThan(0)).toEqual([fresh, young, old]);
  });

  it("pages by id: each page continues where the last ended, and the last says so", async () => {
    const queue = uniqueName("pages");
    const ids = await enqueueMany(
      Array.from({ length: 5 }, () => ({ task: "t" })),
      { db: t.db, queue },
    );
    const first = await listJobs({ db: t.db, queue, limit: 2 });
    expect(first.jobs.map((j) => j.id)).toEqual([ids[4], ids[3]]);
    const second = await listJobs({ db: t.db, queue, limit: 2, before: first.next! });
    expect(second.jobs.map((j) => j.id)).toEqual([ids[2], ids[1]]);
    const last = await listJobs({ db: t.db, queue, limit: 2, before: second.next! });
    expect(last).toEqual({ jobs: [expect.objectContaining({ id: ids[0] })], next: null });
  });

  it("refuses bad filters with a JobError (an empty tenant never widens to every tenant)", async () => {
    for (const options of [{ status: "nope" }, { tenant: "" }, { limit: 0 }, { limit: 501 }, { before: -1 }, { olderThan: -5 }, { qeue: "x" }]) {
      await expect(listJobs({ db: t.db, ...(options as object) })).rejects.toBeInstanceOf(JobError);
    }
  });
});
