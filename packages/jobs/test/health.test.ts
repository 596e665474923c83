// The checks behind `forge-jobs doctor`, read from src/health.ts (audit 13.7).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, enqueue } from "../src/index.js";
import { claimJobs } from "../src/run/claim.js";
import { connectionError, jobsPastLease, schemaState, tasksWithoutHandler } from "../src/maintenance/health.js";
import { latestVersion } from "../src/migrations/migrate.js";
import { backends, waitFor, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("health checks ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await backend.create();
  });
  afterAll(async () => {
    await t.close();
  });

  it("report the connection, the schema version, jobs past their lease and tasks without a handler", async () => {
    expect(await connectionError(t.db)).toBeNull();
    expect(await schemaState(t.db)).toEqual({ version: latestVersion(backend.name), latest: latestVersion(backend.name) });
    await enqueue("a", null, { db: t.db, queue: "health" });
    await enqueue("b", null, { db: t.db, queue: "health" });
    await enqueue("b", null, { db: t.db, queue: "health-lost" });
    expect(await jobsPastLease(t.db)).toBe(0);
    await claimJobs(t.db, { queues: ["health-lost"], limit: 1, start: 1, lease: 0.05, workerId: "lost" });
    // The database's clock decides: wait until it has passed the lease.
    await waitFor("the lease to run out", async () => (await jobsPastLease(t.db)) === 1);
    expect(await tasksWithoutHandler(t.db, (task) => task === "a")).toEqual({ queued: 2, missing: [{ task: "b", count: 2 }] });
    expect(await tasksWithoutHandler(t.db, () => true)).toEqual({ queued: 2, missing: [] });
  });
});

describe("health checks without a database", () => {
  it("say why a database cannot be reached, and that a blank one has no schema", async () => {
    const unreachable = connect("postgres://nobody@127.0.0.1:1/none");
    try {
      expect(await connectionError(unreachable)).toMatch(/ECONNREFUSED|connect/);
    } finally {
      await unreachable.close();
    }
    const blank = connect("sqlite::memory:");
    try {
      expect(await schemaState(blank)).toEqual({ version: 0, latest: latestVersion("sqlite") });
    } finally {
      await blank.close();
    }
  });
});
