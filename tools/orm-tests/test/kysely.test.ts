import Database from "better-sqlite3";
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, type Dialect } from "kysely";
import { createPool } from "mysql2";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { getJob, JobAbortedError, processOne, reclaim } from "@forge/jobs";
import { jobsIn, placeOrder, saveBatch } from "../examples/kysely.js";
import { describeOrm } from "../src/conformance.js";
import { backends, createTarget, type Target } from "../src/targets.js";

function kysely(t: Target) {
  const dialects: Record<Target["backend"], () => Dialect> = {
    postgres: () => new PostgresDialect({ pool: new pg.Pool({ connectionString: t.url, max: 4 }) }),
    sqlite: () => new SqliteDialect({ database: new Database(t.file) }),
    mysql: () => new MysqlDialect({ pool: createPool({ uri: t.url, connectionLimit: 4 }) }),
  };
  return new Kysely<Parameters<typeof placeOrder>[0] extends Kysely<infer D> ? D : never>({ dialect: dialects[t.backend]() });
}

for (const backend of backends()) {
  describeOrm("Kysely", backend, async (t) => {
    const db = kysely(t);
    return {
      transaction: (fn, isolation) => {
        const builder = isolation ? db.transaction().setIsolationLevel(isolation) : db.transaction();
        return builder.execute((trx) =>
          fn({
            jobs: jobsIn(trx, backend),
            addOrder: async (item) => void (await trx.insertInto("orders").values({ item }).execute()),
          }),
        );
      },
      close: () => db.destroy(),
    };
  });

  describe(`the README's Kysely example on ${backend}`, () => {
    it("placeOrder publishes the order and its job", async () => {
      const t = await createTarget(backend);
      const db = kysely(t);
      try {
        const id = await placeOrder(db, backend, "pen");
        expect(await t.orders()).toEqual(["pen"]);
        expect(await getJob(id, { db: t.queue })).toMatchObject({ task: "ship", payload: { item: "pen" } });
      } finally {
        await db.destroy();
        await t.drop();
      }
    });

    // examples/kysely.ts is the README's block (test/readme.test.ts), so this runs the README's saveBatch.
    it("saveBatch writes the batch with the progress; once the job is taken over it throws and Kysely rolls the batch back", async () => {
      const t = await createTarget(backend);
      const db = kysely(t);
      try {
        const id = await placeOrder(db, backend, "pen");
        let fenced: unknown;
        const ran = await processOne(
          {
            ship: async (_payload: unknown, ctx) => {
              await saveBatch(db, backend, ctx, ["nib", "ink"], 2);
              await reclaim({ db: t.queue, lease: 0 }); // another worker's turn: this run's claim token is stale
              fenced = await saveBatch(db, backend, ctx, ["cap"], 3).catch((e: unknown) => e);
              expect(ctx.signal.aborted).toBe(true);
              throw fenced;
            },
          },
          { db: t.queue },
        );
        expect(ran).toBe(true);
        expect(fenced).toBeInstanceOf(JobAbortedError);
        expect(await t.orders()).toEqual(["pen", "nib", "ink"]);
        expect(await getJob(id, { db: t.queue })).toMatchObject({ progress: { cursor: 2 } });
      } finally {
        await db.destroy();
        await t.drop();
      }
    });
  });
}
