import type Database from "better-sqlite3";
import { drizzle, type BetterSQLite3Database } from "drizzle-orm/better-sqlite3";
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { enqueue, type JobContext } from "@forge/jobs";

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

/** In a handler: the batch through Drizzle over the queue's own transaction (`ctx.checkpoint`), fenced. */
export function saveBatch(ctx: JobContext, items: string[], cursor: number): Promise<boolean> {
  return ctx.checkpoint({ cursor }, (tx: Database.Database) => {
    drizzle({ client: tx })
      .insert(orders)
      .values(items.map((item) => ({ item })))
      .run();
  });
}
