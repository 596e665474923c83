import type Database from "better-sqlite3";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { enqueue, enqueueMany, type JobContext } from "@forge/jobs";

export const orders = sqliteTable("orders", { id: integer("id").primaryKey({ autoIncrement: true }), item: text("item").notNull() });

/**
 * Drizzle's better-sqlite3 transactions are synchronous: hand the queue the same handle
 * (`db.$client`). Its INSERT runs before `enqueue` returns its promise, inside the transaction.
 */
export async function placeOrder(db: BetterSQLite3Database & { $client: Database.Database }, item: string): Promise<number> {
  let job!: Promise<number>;
  db.transaction((tx) => {
    tx.insert(orders).values({ item }).run();
    job = enqueue("ship", { item }, { db: db.$client });
  });
  return job;
}

/**
 * A flow, a batch or a keyed `enqueueMany` takes several statements with awaits between them,
 * and a synchronous transaction has committed before the second one runs: inside
 * `db.transaction` the queue refuses them (a JobError, nothing written). Open the transaction
 * on the handle and await inside it; nothing else may use the handle until it ends.
 */
export async function placeOrderWithFlow(db: BetterSQLite3Database & { $client: Database.Database }, item: string): Promise<number[]> {
  db.$client.exec("BEGIN IMMEDIATE");
  try {
    db.insert(orders).values({ item }).run();
    const ids = await enqueueMany(
      [
        { task: "invoice", payload: { item }, ref: "invoice" },
        { task: "ship", payload: { item }, dependsOn: ["invoice"] },
      ],
      { db: db.$client },
    );
    db.$client.exec("COMMIT");
    return ids;
  } catch (error) {
    if (db.$client.inTransaction) db.$client.exec("ROLLBACK");
    throw error;
  }
}

/** In a handler: the batch through Drizzle over the queue's own transaction (`ctx.checkpoint`), fenced. */
export function saveBatch(ctx: JobContext, items: string[], cursor: number): Promise<boolean> {
  return ctx.checkpoint({ cursor }, (tx: Database.Database) => {
    drizzle({ client: tx })
      .insert(orders)
      .values(items.map((item) => ({ item })))
      .run();
  });
}
