import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, processOne } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("transactional enqueue ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  it("after ROLLBACK no job exists", async () => {
    const id = await t.withTransaction((bound) => enqueue("welcome", { user: 1 }, { db: bound, queue: "tx" }), "rollback");
    expect(await getJob(id, { db: t.db })).toBeNull();
    expect(await processOne({ welcome: () => undefined }, { db: t.db, queue: "tx" })).toBe(false);
  });

  it("after COMMIT it exists, and a worker never sees it before the commit", async () => {
    let seenBeforeCommit: boolean | undefined;
    const id = await t.withTransaction(async (bound) => {
      const jobId = await enqueue("welcome", { user: 2 }, { db: bound, queue: "tx" });
      // A worker polling now, from another connection, must find nothing.
      if (backend.name !== "sqlite") seenBeforeCommit = await processOne({ welcome: () => undefined }, { db: t.db, queue: "tx" });
      return jobId;
    }, "commit");
    if (backend.name !== "sqlite") expect(seenBeforeCommit).toBe(false);
    expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
    expect(await processOne({ welcome: () => undefined }, { db: t.db, queue: "tx" })).toBe(true);
    expect((await getJob(id, { db: t.db }))!.status).toBe("done");
  });
});
