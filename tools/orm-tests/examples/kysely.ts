import { CompiledQuery, type Generated, type Kysely, type Transaction } from "kysely";
import { checkpointIn, enqueue, fromQuery, type DialectName, type JobContext } from "@forge/jobs";

interface Database {
  orders: { id: Generated<number>; item: string };
}

/** The queue inside a Kysely transaction: every statement of the queue runs through `trx`. */
export function jobsIn(trx: Transaction<Database>, dialect: DialectName) {
  return fromQuery({ dialect, query: (sql, params) => trx.executeQuery(CompiledQuery.raw(sql, params)) });
}

/** The order and its shipping job: one commit publishes both, a rollback neither. */
export function placeOrder(db: Kysely<Database>, dialect: DialectName, item: string): Promise<number> {
  return db.transaction().execute(async (trx) => {
    await trx.insertInto("orders").values({ item }).execute();
    return enqueue("ship", { item }, { db: jobsIn(trx, dialect) });
  });
}

/** In a handler: a batch and the job's progress in one Kysely transaction, fenced by the claim token. */
export function saveBatch(db: Kysely<Database>, dialect: DialectName, ctx: JobContext, items: string[], cursor: number): Promise<void> {
  return db.transaction().execute(async (trx) => {
    await checkpointIn(jobsIn(trx, dialect), ctx, { cursor }); // throws once the job was taken over: Kysely rolls back
    await trx
      .insertInto("orders")
      .values(items.map((item) => ({ item })))
      .execute();
  });
}
