import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkpointIn,
  drain,
  enqueue,
  enqueueBatch,
  enqueueMany,
  getJob,
  JobAbortedError,
  JobError,
  pendingCount,
  processOne,
  reclaim,
  type EnqueueManyItem,
  type JobContext,
  type JobsDatabase,
} from "@forge/jobs";
import { createTarget, type Backend, type Target } from "./targets.js";

export type Isolation = "read committed" | "repeatable read";

/** What the application has inside one of its ORM's transactions. */
export interface OrmTx {
  /** The queue over this transaction: the README example's adapter. */
  jobs: JobsDatabase;
  /** A business row written through the ORM itself. */
  addOrder(item: string): Promise<void>;
}

/** One ORM on one backend, opened over a test database. */
export interface OrmHarness {
  /** Runs `fn` in a transaction of the ORM (its own API), committing unless `fn` throws. */
  transaction<T>(fn: (tx: OrmTx) => Promise<T>, isolation?: Isolation): Promise<T>;
  close(): Promise<void>;
}

const ROLLBACK = new Error("roll back on purpose");

/** Runs `fn` in a transaction that is then rolled back (by throwing through the ORM). */
async function rolledBack<T>(h: OrmHarness, fn: (tx: OrmTx) => Promise<T>, isolation?: Isolation): Promise<T> {
  let value!: T;
  const error = await h
    .transaction(async (tx) => {
      value = await fn(tx);
      throw ROLLBACK;
    }, isolation)
    .catch((e: unknown) => e);
  if (error !== ROLLBACK && (error as { cause?: unknown } | null)?.cause !== ROLLBACK) throw error;
  return value;
}

/** Two renders and a zip that waits for both: the README's flow. */
export const FLOW: EnqueueManyItem[] = [
  { task: "render", payload: { page: 1 }, ref: "p1" },
  { task: "render", payload: { page: 2 }, ref: "p2" },
  { task: "zip", dependsOn: ["p1", "p2"] },
];

export const FLOW_HANDLERS = {
  render: (payload: unknown) => `page ${(payload as { page: number }).page}`,
  zip: async (_payload: unknown, ctx: JobContext) => (await ctx.dependencies()).map((d) => d.result),
};

export const BATCH_ITEMS: EnqueueManyItem[] = ["a@example.com", "b@example.com"].map((to) => ({ task: "mail", payload: { to } }));

export const BATCH_HANDLERS = {
  mail: () => "sent",
  campaign: async (_payload: unknown, ctx: JobContext) => await ctx.batch(),
};

/** The dependency edges touching `ids`, as [job, dependency] pairs. */
export async function edgesOf(t: Target, ids: number[]): Promise<number[][]> {
  const list = (from: number) => ids.map((_, i) => `$${from + i + 1}`).join(", ");
  const rows = await t.sql<{ job_id: number | string; depends_on_id: number | string }>(
    `SELECT job_id, depends_on_id FROM jobs_dependencies WHERE job_id IN (${list(0)}) OR depends_on_id IN (${list(ids.length)}) ORDER BY job_id, depends_on_id`,
    [...ids, ...ids],
  );
  return rows.map((r) => [Number(r.job_id), Number(r.depends_on_id)]);
}

/** The batch's row, or null. */
export async function batchRow(t: Target, id: number): Promise<{ total: number; callbackId: number | null } | null> {
  const [row] = await t.sql<{ total: number | string; callback_id: number | string | null }>("SELECT total, callback_id FROM jobs_batches WHERE id = $1", [id]);
  return row ? { total: Number(row.total), callbackId: row.callback_id === null ? null : Number(row.callback_id) } : null;
}

/**
 * The promise of transactional enqueue, held inside one ORM's transactions on one backend:
 * commit publishes the row and the job together, rollback neither, no worker sees the job
 * before the commit, keyed enqueues behave as outside, and checkpoints write the handler's
 * batch and the progress in the ORM's transaction, fenced.
 */
export function describeOrm(orm: string, backend: Backend, open: (target: Target) => Promise<OrmHarness>): void {
  describe(`${orm} on ${backend}`, () => {
    let t: Target;
    let h: OrmHarness;
    beforeAll(async () => {
      t = await createTarget(backend);
      h = await open(t);
    });
    afterAll(async () => {
      await h?.close();
      await t?.drop();
    });
    // MariaDB's default level is REPEATABLE READ; the "as outside" cases ask for READ COMMITTED.
    const readCommitted: Isolation | undefined = backend === "sqlite" ? undefined : "read committed";

    it("commit publishes the order and its job together; no worker sees the job before the commit", async () => {
      let seen: boolean | null = null;
      const id = await h.transaction(async (tx) => {
        await tx.addOrder("book");
        const jobId = await enqueue("ship", { item: "book" }, { db: tx.jobs, queue: "commit" });
        // From the queue's own connection: a worker polling now must find nothing. (SQLite:
        // the ORM holds the write lock, so a claim would wait; a read sees the last commit.)
        seen =
          backend === "sqlite" ? (await getJob(jobId, { db: t.queue })) !== null : await processOne({ ship: () => "early" }, { db: t.queue, queue: "commit" });
        return jobId;
      }, readCommitted);
      expect(seen).toBe(false);
      expect(await t.orders()).toContain("book");
      expect(await getJob(id, { db: t.queue })).toMatchObject({ status: "pending", payload: { item: "book" } });
      expect(await processOne({ ship: () => "shipped" }, { db: t.queue, queue: "commit" })).toBe(true);
      expect(await getJob(id, { db: t.queue })).toMatchObject({ status: "done", result: "shipped" });
    });

    it("rollback leaves neither the order nor its job", async () => {
      const id = await rolledBack(h, async (tx) => {
        await tx.addOrder("lamp");
        return enqueue("ship", { item: "lamp" }, { db: tx.jobs, queue: "rollback" });
      });
      expect(await getJob(id, { db: t.queue })).toBeNull();
      expect(await t.orders()).not.toContain("lamp");
      expect(await pendingCount({ db: t.queue, queue: "rollback" })).toBe(0);
    });

    it("enqueueMany in the transaction: all the jobs with the commit, none with a rollback", async () => {
      const items = Array.from({ length: 50 }, (_, i) => ({ task: "ship", payload: { i }, idempotencyKey: i % 10 === 0 ? `many-${i}` : undefined }));
      await rolledBack(h, (tx) => enqueueMany(items, { db: tx.jobs, queue: "many" }));
      expect(await pendingCount({ db: t.queue, queue: "many" })).toBe(0);
      const ids = await h.transaction((tx) => enqueueMany(items, { db: tx.jobs, queue: "many" }), readCommitted);
      expect(new Set(ids).size).toBe(50);
      expect(await pendingCount({ db: t.queue, queue: "many" })).toBe(50);
      expect((await getJob(ids[49]!, { db: t.queue }))!.payload).toEqual({ i: 49 });
    });

    // A flow is several statements (jobs, their states, the edges): all of them must ride on the
    // ORM's transaction, or a rollback leaves edges or jobs behind and a commit shows the zip
    // claimable before its edges exist.
    it("a flow (enqueueMany with ref/dependsOn) in the transaction: its jobs and dependency edges with the commit, none with a rollback", async () => {
      const lost = await rolledBack(h, async (tx) => {
        await tx.addOrder("flow-lost");
        return enqueueMany(FLOW, { db: tx.jobs, queue: "flow" });
      });
      expect(lost).toHaveLength(3);
      for (const id of lost) expect(await getJob(id, { db: t.queue })).toBeNull();
      expect(await edgesOf(t, lost)).toEqual([]);
      expect(await t.orders()).not.toContain("flow-lost");

      const [p1, p2, zip] = (await h.transaction(async (tx) => {
        await tx.addOrder("flow");
        return enqueueMany(FLOW, { db: tx.jobs, queue: "flow" });
      }, readCommitted)) as [number, number, number];
      expect(await t.orders()).toContain("flow");
      expect(await edgesOf(t, [p1, p2, zip])).toEqual([
        [zip, p1],
        [zip, p2],
      ]);
      expect(await getJob(zip, { db: t.queue })).toMatchObject({ status: "waiting", dependsOn: [p1, p2] });
      expect(await drain(FLOW_HANDLERS, { db: t.queue, queue: "flow" })).toBe(3);
      expect(await getJob(zip, { db: t.queue })).toMatchObject({ status: "done", result: ["page 1", "page 2"] });
    });

    it("enqueueBatch in the transaction: its items, callback and batch row with the commit, none with a rollback", async () => {
      const onComplete = { task: "campaign", payload: { campaign: 7 } };
      const lost = await rolledBack(h, async (tx) => {
        await tx.addOrder("campaign-lost");
        return enqueueBatch(BATCH_ITEMS, { db: tx.jobs, queue: "batch", onComplete });
      });
      for (const id of [...lost.ids, lost.callbackId!]) expect(await getJob(id, { db: t.queue })).toBeNull();
      expect(await batchRow(t, lost.batchId)).toBeNull();
      expect(await t.orders()).not.toContain("campaign-lost");

      const batch = await h.transaction(async (tx) => {
        await tx.addOrder("campaign");
        return enqueueBatch(BATCH_ITEMS, { db: tx.jobs, queue: "batch", onComplete });
      }, readCommitted);
      expect(await t.orders()).toContain("campaign");
      expect(await batchRow(t, batch.batchId)).toEqual({ total: 2, callbackId: batch.callbackId });
      expect(await getJob(batch.callbackId!, { db: t.queue })).toMatchObject({ status: "waiting" });
      for (const id of batch.ids) expect(await getJob(id, { db: t.queue })).toMatchObject({ status: "pending", batchId: batch.batchId });
      expect(await drain(BATCH_HANDLERS, { db: t.queue, queue: "batch" })).toBe(3);
      expect(await getJob(batch.callbackId!, { db: t.queue })).toMatchObject({
        status: "done",
        result: { batchId: batch.batchId, done: 2, failed: 0, cancelled: 0 },
      });
    });

    it("a keyed enqueue in the transaction returns the committed winner's id, as outside it", async () => {
      const winner = await enqueue("ship", { first: true }, { db: t.queue, queue: "keyed", idempotencyKey: "order-1" });
      const [again, twice] = await h.transaction(async (tx) => {
        const a = await enqueue("ship", { first: false }, { db: tx.jobs, queue: "keyed", idempotencyKey: "order-1" });
        const b = await enqueue("ship", { new: true }, { db: tx.jobs, queue: "keyed", idempotencyKey: "order-2" });
        const c = await enqueue("ship", { new: false }, { db: tx.jobs, queue: "keyed", idempotencyKey: "order-2" });
        return [a, b === c ? b : -1];
      }, readCommitted);
      expect(again).toBe(winner);
      expect(twice).toBeGreaterThan(0);
      const [row] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM jobs WHERE queue = 'keyed'");
      expect(Number(row!.n)).toBe(2);
    });

    // What a keyed enqueue meets under REPEATABLE READ when the key's holder committed after the
    // snapshot. PostgreSQL refuses the insert (40001). MariaDB reads the holder with a locking
    // read, which innodb_snapshot_isolation decides: OFF (the default before 11.6) returns the
    // committed row, ON (the default from 11.6) refuses it (ER_CHECKREAD). Both are pinned here.
    const repeatableRead: { name: string; snapshotIsolation?: "OFF" | "ON"; gives: "winner" | "JobError" }[] =
      backend === "postgres"
        ? [{ name: "PostgreSQL", gives: "JobError" }]
        : backend === "mysql"
          ? [
              { name: "MariaDB, innodb_snapshot_isolation OFF", snapshotIsolation: "OFF", gives: "winner" },
              { name: "MariaDB, innodb_snapshot_isolation ON", snapshotIsolation: "ON", gives: "JobError" },
            ]
          : [];
    for (const rr of repeatableRead) {
      it(`under REPEATABLE READ (${rr.name}), a key committed after the snapshot gives ${rr.gives === "winner" ? "the winner's id" : "a JobError saying what to do"}`, async () => {
        const queue = `rr-${rr.snapshotIsolation ?? "pg"}`;
        const outcome = await rolledBack(
          h,
          async (tx) => {
            // A session setting: put back before the connection returns to the ORM's pool.
            if (rr.snapshotIsolation) await tx.jobs.executor.query(`SET SESSION innodb_snapshot_isolation = ${rr.snapshotIsolation}`);
            try {
              await pendingCount({ db: tx.jobs, queue }); // the snapshot is taken here
              const winner = await enqueue("ship", { first: true }, { db: t.queue, queue, idempotencyKey: `${queue}-1` });
              const id = await enqueue("ship", { first: false }, { db: tx.jobs, queue, idempotencyKey: `${queue}-1` }).catch((e: unknown) => e);
              return { winner, id };
            } finally {
              if (rr.snapshotIsolation) await tx.jobs.executor.query("SET SESSION innodb_snapshot_isolation = DEFAULT");
            }
          },
          "repeatable read",
        );
        if (rr.gives === "winner") expect(outcome.id).toBe(outcome.winner);
        else {
          expect(outcome.id).toBeInstanceOf(JobError);
          expect((outcome.id as Error).message).toMatch(/outside the transaction or run it at READ COMMITTED/);
        }
        const [row] = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM jobs WHERE queue = $1", [queue]);
        expect(Number(row!.n)).toBe(1);
      });
    }

    it("checkpointIn: the batch written through the ORM lands with the progress; once the job is taken over, the ORM rolls the batch back", async () => {
      const id = await enqueue("import", { rows: 4 }, { db: t.queue, queue: "import", maxAttempts: 3 });
      let fenced: unknown;
      const ran = await processOne(
        {
          import: async (_payload: unknown, ctx) => {
            await h.transaction(async (tx) => {
              await checkpointIn(tx.jobs, ctx, { cursor: 2 }); // first: the job's row stays locked until the commit
              await tx.addOrder("batch-1");
            });
            expect(await t.sql("SELECT progress FROM jobs WHERE id = $1", [id])).toHaveLength(1);
            await reclaim({ db: t.queue, lease: 0 }); // another worker's turn: this run's token is stale
            fenced = await h
              .transaction(async (tx) => {
                await tx.addOrder("batch-2");
                await checkpointIn(tx.jobs, ctx, { cursor: 4 });
              })
              .catch((e: unknown) => e);
            throw fenced;
          },
        },
        { db: t.queue, queue: "import" },
      );
      expect(ran).toBe(true);
      expect(fenced instanceof JobAbortedError || (fenced as Error).cause instanceof JobAbortedError).toBe(true);
      expect(await t.orders()).toContain("batch-1");
      expect(await t.orders()).not.toContain("batch-2");
      expect(await getJob(id, { db: t.queue })).toMatchObject({ status: "pending", progress: { cursor: 2 } });
    });
  });
}
