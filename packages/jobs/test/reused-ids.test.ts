// The live table's ids restarting below history's (a TRUNCATE of the live table alone restarts
// MariaDB's AUTO_INCREMENT, and PostgreSQL's identity with RESTART IDENTITY; an edit of
// sqlite_sequence does it on SQLite): jobs then take ids that ended jobs hold in history. The
// write that ends such a job must still land (on MariaDB and SQLite, history's primary key
// refused it, and the job stayed running for good), later jobs must get ids past history's, and
// `forge-jobs doctor` must say so before it is mended. All backends.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { drain, enqueue, getJob, processOne } from "../src/index.js";
import { idsBehindHistory } from "../src/run/reused-ids.js";
import { backends, waitFor, type TestDatabase } from "./helpers/backends.js";
import { runCli } from "./helpers/cli.js";

describe.each(backends())("job ids restarted below history's ($name)", (backend) => {
  let t: TestDatabase;
  const queue = "reused";
  const warnings: string[] = [];
  const onWarning = (warning: Error) => void warnings.push(warning.message);

  beforeAll(async () => {
    t = await backend.create();
    process.on("warning", onWarning);
  });
  afterAll(async () => {
    process.off("warning", onWarning);
    await t?.close();
  });

  /** What a user's test teardown does to the live table alone. */
  async function restartLiveIds() {
    if (backend.name === "postgres") await t.sql("TRUNCATE {jobs} RESTART IDENTITY");
    else if (backend.name === "mysql") await t.sql("TRUNCATE TABLE {jobs}");
    else {
      await t.sql("DELETE FROM {jobs}");
      await t.sql("UPDATE sqlite_sequence SET seq = 0 WHERE name = 'jobs'");
    }
  }

  it("a job whose id an ended job holds still ends, later ids continue after history's, and doctor tells before", async () => {
    const handlers = { old: () => ({ world: "before" }), fresh: (p: { n: number }) => ({ world: "after", n: p.n }) };
    const before = [];
    for (let n = 0; n < 3; n++) before.push(await enqueue("old", null, { db: t.db, queue }));
    expect(await drain(handlers, { db: t.db, queue })).toBe(3);
    expect(await idsBehindHistory(t.db)).toBeNull();

    await restartLiveIds();
    const reused = await enqueue("fresh", { n: 1 }, { db: t.db, queue });
    expect(before).toContain(reused);
    expect(await idsBehindHistory(t.db)).toEqual({ next: reused + 1, highest: Math.max(...before) });

    const common = ["--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])];
    const doctor = await runCli(["doctor", ...common], { env: { DATABASE_URL: "" } });
    expect(doctor.stdout).toContain(`PROBLEM the live table's next job id (${reused + 1}) is not above history's highest (${Math.max(...before)})`);
    expect(doctor.code).not.toBe(0);

    // The job ends: not stuck running. On MariaDB and SQLite its id is its own again.
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    if (backend.name !== "postgres")
      expect(await getJob(reused, { db: t.db })).toMatchObject({ id: reused, task: "fresh", status: "done", result: { world: "after", n: 1 } });
    expect(await t.sql("SELECT task FROM {jobs} WHERE id = $1", [reused])).toEqual([]);
    expect(await t.sql("SELECT task FROM {history} WHERE id = $1 ORDER BY task DESC", [reused])).toEqual(
      backend.name === "postgres" ? [{ task: "old" }, { task: "fresh" }] : [{ task: "fresh" }],
    );

    if (backend.name === "postgres") {
      // History takes the duplicate without a word: only doctor can tell, and its advice mends it.
      const mend = /run (SELECT setval\(.*\))$/m.exec(doctor.stdout)?.[1];
      expect(mend).toBeDefined();
      await t.sql(mend as string);
    } else {
      // Node delivers a warning on a later tick.
      await waitFor("the warning", async () => warnings.some((w) => w.includes("the live jobs table's ids restarted below history's")));
    }
    expect(await idsBehindHistory(t.db)).toBeNull();
    const next = await enqueue("fresh", { n: 2 }, { db: t.db, queue });
    expect(next).toBeGreaterThan(Math.max(...before));
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(await getJob(next, { db: t.db })).toMatchObject({ status: "done", result: { world: "after", n: 2 } });
    const healthy = await runCli(["doctor", ...common], { env: { DATABASE_URL: "" } });
    expect(healthy.stdout).toContain("ok      new job ids continue after history's\n");
  }, 60_000);
});
