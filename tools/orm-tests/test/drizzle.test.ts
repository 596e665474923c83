import { drizzle as drizzleMysql } from "drizzle-orm/mysql2";
import { int, mysqlTable, varchar } from "drizzle-orm/mysql-core";
import { drizzle as drizzlePg } from "drizzle-orm/node-postgres";
import { createPool } from "mysql2";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { getJob, processOne } from "@forge/jobs";
import { jobsIn, orders, placeOrder, saveBatch } from "../examples/drizzle.js";
import { describeOrm } from "../src/conformance.js";
import { backends, createTarget } from "../src/targets.js";

const mysqlOrders = mysqlTable("orders", { id: int("id").autoincrement().primaryKey(), item: varchar("item", { length: 200 }).notNull() });

// Drizzle's better-sqlite3 transactions are synchronous: test/drizzle-sqlite.test.ts.
for (const backend of backends().filter((b) => b !== "sqlite")) {
  describeOrm("Drizzle", backend, async (t) => {
    if (backend === "postgres") {
      const pool = new pg.Pool({ connectionString: t.url, max: 4 });
      const db = drizzlePg({ client: pool });
      return {
        transaction: (fn, isolation) =>
          db.transaction(
            (tx) => fn({ jobs: jobsIn(tx, "postgres"), addOrder: async (item) => void (await tx.insert(orders).values({ item })) }),
            isolation ? { isolationLevel: isolation } : undefined,
          ),
        close: () => pool.end(),
      };
    }
    const pool = createPool({ uri: t.url, connectionLimit: 4 });
    const db = drizzleMysql({ client: pool });
    return {
      transaction: (fn, isolation) =>
        db.transaction(
          (tx) => fn({ jobs: jobsIn(tx, "mysql"), addOrder: async (item) => void (await tx.insert(mysqlOrders).values({ item })) }),
          isolation ? { isolationLevel: isolation } : undefined,
        ),
      close: () => new Promise<void>((resolve) => pool.end(() => resolve())),
    };
  });
}

describe.skipIf(!backends().includes("postgres"))("the README's Drizzle example (node-postgres)", () => {
  it("placeOrder publishes the order and its job; saveBatch writes a batch with the progress", async () => {
    const t = await createTarget("postgres");
    const pool = new pg.Pool({ connectionString: t.url, max: 2 });
    const db = drizzlePg({ client: pool });
    try {
      const id = await placeOrder(db, "pen");
      expect(await getJob(id, { db: t.queue })).toMatchObject({ task: "ship", payload: { item: "pen" } });
      await processOne({ ship: (_p: unknown, ctx) => saveBatch(db, ctx, ["nib", "ink"], 2) }, { db: t.queue });
      expect(await t.orders()).toEqual(["pen", "nib", "ink"]);
      expect(await getJob(id, { db: t.queue })).toMatchObject({ status: "done", progress: { cursor: 2 } });
    } finally {
      await pool.end();
      await t.drop();
    }
  });
});
