import { EntitySchema, type DataSource, type EntityManager } from "typeorm";
import { enqueue, fromQuery, type DialectName } from "@forge/jobs";

export const Order = new EntitySchema<{ id: number; item: string }>({
  name: "Order",
  tableName: "orders",
  columns: { id: { type: Number, primary: true, generated: true }, item: { type: String } },
});

/** The queue inside a TypeORM transaction: the statements run on the transaction's query runner. */
export function jobsIn(manager: EntityManager, dialect: DialectName) {
  return fromQuery({
    dialect,
    query: async (sql, params) => {
      const { records, affected } = await manager.queryRunner!.query(sql, params, true);
      return { rows: Array.isArray(records) ? records : [], rowCount: affected };
    },
  });
}

/** The order and its shipping job: one commit publishes both, a rollback neither. */
export function placeOrder(dataSource: DataSource, dialect: DialectName, item: string): Promise<number> {
  return dataSource.transaction(async (manager) => {
    await manager.insert(Order, { item });
    return enqueue("ship", { item }, { db: jobsIn(manager, dialect) });
  });
}
