import Database from "better-sqlite3";
import type { Pool as MysqlPool } from "mysql2/promise";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkpointIn,
  drain,
  enqueue,
  enqueueBatch,
  enqueueMany,
  fromQuery,
  getJob,
  JobAbortedError,
  JobError,
  pendingCount,
  processOne,
  reclaim,
  type QuerySource,
} from "../src/index.js";
import { allJobs, backends, type TestDatabase } from "./helpers/backends.js";

const query: QuerySource["query"] = () => [];

describe("fromQuery: bad input is a JobError that says what to fix", () => {
  it.each([
    [{ dialect: "oracle", query }, /dialect must be "postgres", "sqlite" or "mysql"/],
    [{ dialect: "postgres" }, /query must be a function/],
    [{ dialect: "postgres", query, execute: 1 }, /execute, when given, must be a function/],
    [{ dialect: "postgres", query, placeholders: ":n" }, /placeholders must be "\$n" or "\?"/],
  ])("%o", (source, message) => {
    expect(() => fromQuery(source as unknown as QuerySource)).toThrow(JobError);
    expect(() => fromQuery(source as unknown as QuerySource)).toThrow(message);
  });

  it("an unknown option", () => {
    expect(() => fromQuery({ dialect: "sqlite", query }, { schemas: "x" } as never)).toThrow(/fromQuery.*schemas/);
  });
});

/**
 * The application's own transaction on a driver connection, reached by the queue only through
 * `query`, answering in the driver's own shape (pg's result, mysql2's pair, better-sqlite3's
 * rows or run result): what an ORM's raw call hands back.
 */
interface AppTransaction {
  source: QuerySource;
  end(outcome: "COMMIT" | "ROLLBACK"): Promise<void>;
}

async function begin(name: string, t: TestDatabase, isolation?: string): Promise<AppTransaction> {
  if (name === "postgres") {
    const client = await (t.db.executor.raw as pg.Pool).connect();
    await client.query(isolation ? `BEGIN ISOLATION LEVEL ${isolation}` : "BEGIN");
    return {
      source: { dialect: "postgres", query: (sql, params) => client.query(sql, params) },
      end: async (outcome) => {
        await client.query(outcome);
        client.release();
      },
    };
  }
  if (name === "mysql") {
    const connection = await (t.db.executor.raw as MysqlPool).getConnection();
    await connection.query(`SET TRANSACTION ISOLATION LEVEL ${isolation ?? "READ COMMITTED"}`);
    await connection.query("BEGIN");
    return {
      source: { dialect: "mysql", query: (sql, params) => connection.query(sql, params) as never },
      end: async (outcome) => {
        await connection.query(outcome);
        connection.release();
      },
    };
  }
  const app = new Database(t.url.slice("sqlite:".length));
  app.exec("BEGIN IMMEDIATE");
  return {
    source: {
      dialect: "sqlite",
      query: (sql, params) => {
        const statement = app.prepare(sql);
        return statement.reader ? statement.all(...params) : statement.run(...params);
      },
    },
    end: async (outcome) => {
      app.exec(outcome);
      app.close();
    },
  };
}

describe.each(backends())("fromQuery over the application's transaction ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());
  const options = () => (t.schema ? { schema: t.schema } : {});

  it("commit publishes the job, rollback leaves none; a worker sees nothing before the commit", async () => {
    for (const outcome of ["ROLLBACK", "COMMIT"] as const) {
      const tx = await begin(backend.name, t);
      const db = fromQuery(tx.source, options());
      const id = await enqueue("welcome", { outcome }, { db, queue: outcome, idempotencyKey: `k-${outcome}` });
      const many = await enqueueMany(
        [
          { task: "welcome", payload: { n: 1 } },
          { task: "welcome", payload: { n: 2 }, dedupKey: `d-${outcome}` },
        ],
        { db, queue: outcome },
      );
      if (backend.name !== "sqlite") expect(await processOne({ welcome: () => undefined }, { db: t.db, queue: outcome })).toBe(false);
      await tx.end(outcome);
      expect(many).toHaveLength(2);
      expect(await getJob(id, { db: t.db })).toEqual(outcome === "COMMIT" ? expect.objectContaining({ status: "pending" }) : null);
      expect(await pendingCount({ db: t.db, queue: outcome })).toBe(outcome === "COMMIT" ? 3 : 0);
    }
  });

  // Flows and batches are several statements each (jobs, states, edges; batch row, callback,
  // tags): every one must go through `query`, or a rollback leaves some of them behind.
  it("a flow and a batch through fromQuery: jobs, dependency edges and batch row with the commit, none with a rollback", async () => {
    const count = async (sql: string, params: unknown[]) => Number((await t.db.executor.query<{ n: number | string }>(sql, params)).rows[0]!.n);
    for (const outcome of ["ROLLBACK", "COMMIT"] as const) {
      const queue = `flow-${outcome}`;
      const tx = await begin(backend.name, t);
      const db = fromQuery(tx.source, options());
      const [p1, p2, zip] = (await enqueueMany(
        [
          { task: "render", payload: { page: 1 }, ref: "p1" },
          { task: "render", payload: { page: 2 }, ref: "p2" },
          { task: "zip", dependsOn: ["p1", "p2"] },
        ],
        { db, queue },
      )) as [number, number, number];
      const batch = await enqueueBatch([{ task: "mail" }, { task: "mail" }], { db, queue, onComplete: { task: "sent" } });
      await tx.end(outcome);
      const edges = await count(`SELECT count(*) AS n FROM ${t.db.dependenciesTable} WHERE job_id = $1`, [zip]);
      const batchRows = await count(`SELECT count(*) AS n FROM ${t.db.batchesTable} WHERE id = $1`, [batch.batchId]);
      const jobs = await count(`SELECT count(*) AS n FROM ${allJobs(t.db)} WHERE queue = $1`, [queue]);
      if (outcome === "ROLLBACK") {
        expect([edges, batchRows, jobs]).toEqual([0, 0, 0]);
        continue;
      }
      expect([edges, batchRows, jobs]).toEqual([2, 1, 6]);
      expect(await getJob(zip, { db: t.db })).toMatchObject({ status: "waiting", dependsOn: [p1, p2] });
      expect(await getJob(batch.callbackId!, { db: t.db })).toMatchObject({ status: "waiting" });
      const handlers = { render: () => "page", zip: () => "zipped", mail: () => "sent", sent: () => "done" };
      expect(await drain(handlers, { db: t.db, queue })).toBe(6);
      expect(await getJob(zip, { db: t.db })).toMatchObject({ status: "done" });
      expect(await getJob(batch.callbackId!, { db: t.db })).toMatchObject({ status: "done" });
    }
  });

  it("checkpointIn writes the progress in the transaction and throws once the job was taken over", async () => {
    const id = await enqueue("import", {}, { db: t.db, queue: "cp", maxAttempts: 3 });
    const seen: unknown[] = [];
    await processOne(
      {
        import: async (_p: unknown, ctx) => {
          await expect(checkpointIn(t.db, { ...ctx }, 1)).rejects.toThrow(/ctx must be the context a worker passed/);
          for (const step of [1, 2]) {
            if (step === 2) await reclaim({ db: t.db, lease: 0 });
            const tx = await begin(backend.name, t);
            const outcome = await checkpointIn(fromQuery(tx.source, options()), ctx, { step }).catch((e: unknown) => e);
            await tx.end(outcome === undefined ? "COMMIT" : "ROLLBACK");
            seen.push(outcome);
          }
          expect(ctx.signal.aborted).toBe(true);
        },
      },
      { db: t.db, queue: "cp" },
    );
    expect(seen[0]).toBeUndefined();
    expect(seen[1]).toBeInstanceOf(JobAbortedError);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", progress: { step: 1 } });
  });

  it.skipIf(backend.name !== "postgres")("reads the driver's code under an ORM's wrapping (Drizzle's cause, Prisma's driver-adapter error)", async () => {
    const wrappers: ((error: unknown) => unknown)[] = [
      (cause) => new Error("Failed query", { cause }),
      (cause) =>
        Object.assign(new Error("Raw query failed"), {
          code: "P2010",
          clientVersion: "7",
          meta: { driverAdapterError: { cause: { originalCode: (cause as { code: string }).code, kind: "postgres" } } },
        }),
    ];
    for (const wrap of wrappers) {
      const tx = await begin(backend.name, t, "REPEATABLE READ");
      const source: QuerySource = {
        dialect: "postgres",
        query: async (sql, params) =>
          (tx.source.query(sql, params) as Promise<never>).catch((e: unknown) => {
            throw wrap(e);
          }),
      };
      const db = fromQuery(source, options());
      await pendingCount({ db, queue: "wrapped" }); // the snapshot
      const key = `wrapped-${wrappers.indexOf(wrap)}`;
      await enqueue("x", {}, { db: t.db, queue: "wrapped", idempotencyKey: key });
      const error = await enqueue("x", {}, { db, queue: "wrapped", idempotencyKey: key }).catch((e: unknown) => e);
      await tx.end("ROLLBACK");
      expect(error).toBeInstanceOf(JobError);
      expect((error as Error).message).toMatch(/outside the transaction or run it at READ COMMITTED/);
    }
  });
});
