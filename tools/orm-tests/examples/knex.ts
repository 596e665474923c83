import type { Knex } from "knex";
import { enqueue, fromQuery, type DialectName } from "@forge/jobs";

/** The queue inside a Knex transaction. Knex numbers `?` itself on PostgreSQL, hence `placeholders`. */
export function jobsIn(trx: Knex.Transaction, dialect: DialectName) {
  return fromQuery({ dialect, placeholders: "?", query: async (sql, params) => await trx.raw(sql, params as Knex.RawBinding[]) });
}

/** The order and its shipping job: one commit publishes both, a rollback neither. */
export function placeOrder(knex: Knex, dialect: DialectName, item: string): Promise<number> {
  return knex.transaction(async (trx) => {
    await trx("orders").insert({ item });
    return enqueue("ship", { item }, { db: jobsIn(trx, dialect) });
  });
}
