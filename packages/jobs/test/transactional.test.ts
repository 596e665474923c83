import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, JobError, pendingCount, processOne } from "../src/index.js";
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

  // (audit 12.10) MariaDB's default level, and PostgreSQL's when asked: the key's holder was
  // committed after the caller's snapshot, so the caller's reads cannot see it.
  it.skipIf(backend.name === "sqlite").each(["idempotencyKey", "dedupKey"] as const)(
    "a keyed enqueue (%s) inside a REPEATABLE READ transaction gets the winner's id or a JobError that says what to do (audit 12.10)",
    async (key) => {
      const queue = `rr-${key}`;
      const outcome = await t.withTransaction(
        async (bound) => {
          await pendingCount({ db: bound, queue }); // the transaction's snapshot is taken here
          const winner = await enqueue("rr", { first: true }, { db: t.db, queue, [key]: `rr-${key}` });
          const id = await enqueue("rr", { first: false }, { db: bound, queue, [key]: `rr-${key}` }).catch((error: unknown) => error);
          return { winner, id };
        },
        "rollback",
        { isolation: "repeatable read" },
      );
      // PostgreSQL refuses the insert (40001), which aborts the transaction; MariaDB can read the
      // winner with a locking read (unless innodb_snapshot_isolation refuses that too, 11.6+).
      if (backend.name === "postgres") expect(outcome.id).toBeInstanceOf(JobError);
      if (typeof outcome.id === "number") {
        expect(outcome.id).toBe(outcome.winner);
      } else {
        expect(outcome.id).toBeInstanceOf(JobError);
        expect((outcome.id as Error).message).toMatch(/outside the transaction.*READ COMMITTED|READ COMMITTED.*outside the transaction/);
      }
      const [row] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all} WHERE queue = $1", [queue]);
      expect(Number(row!.n)).toBe(1);
    },
  );
});
