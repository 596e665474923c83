import { sql, type SQL } from "drizzle-orm";
import type { NodePgDatabase } from "drizzle-orm/node-postgres";
import { pgTable, serial, text } from "drizzle-orm/pg-core";
import { checkpointIn, enqueue, fromQuery, type JobContext } from "@forge/jobs";

export const orders = pgTable("orders", { id: serial("id").primaryKey(), item: text("item").notNull() });

/** Drizzle SQL from the queue's statement: each `?` becomes a bound parameter. */
function bound(text: string, params: unknown[]): SQL {
  return sql.join(text.split("?").map((part, i) => (i === 0 ? sql.raw(part) : sql`${sql.param(params[i - 1])}${sql.raw(part)}`)));
}

/** The queue inside a Drizzle transaction (node-postgres or mysql2: `{ execute(sql) }`). */
export function jobsIn(tx: { execute(query: SQL): Promise<unknown> }, dialect: "postgres" | "mysql") {
  return fromQuery({ dialect, placeholders: "?", query: (text, params) => tx.execute(bound(text, params)) as never });
}

/** The order and its shipping job: one commit publishes both, a rollback neither. */
export function placeOrder(db: NodePgDatabase, item: string): Promise<number> {
  return db.transaction(async (tx) => {
    await tx.insert(orders).values({ item });
    return enqueue("ship", { item }, { db: jobsIn(tx, "postgres") });
  });
}

/** In a handler: a batch and the job's progress in one Drizzle transaction, fenced by the claim token. */
export function saveBatch(db: NodePgDatabase, ctx: JobContext, items: string[], cursor: number): Promise<void> {
  return db.transaction(async (tx) => {
    await checkpointIn(jobsIn(tx, "postgres"), ctx, { cursor }); // throws once the job was taken over: Drizzle rolls back
    await tx.insert(orders).values(items.map((item) => ({ item })));
  });
}
