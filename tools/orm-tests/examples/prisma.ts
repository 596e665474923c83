import { enqueue, fromQuery, type DialectName } from "@forge/jobs";

/** What the queue needs of an interactive transaction's client (`prisma.$transaction(async (tx) => …)`). */
interface PrismaTx {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
}

/**
 * The queue inside a Prisma interactive transaction. `$queryRawUnsafe` answers rows but not
 * how many a write changed, so statements without a result set go to `$executeRawUnsafe`.
 */
export function jobsIn(tx: PrismaTx, dialect: DialectName) {
  return fromQuery({
    dialect,
    query: (sql, params) => tx.$queryRawUnsafe<unknown[]>(sql, ...params),
    execute: (sql, params) => tx.$executeRawUnsafe(sql, ...params),
  });
}

/** The order and its shipping job: one commit publishes both, a rollback neither. */
export function placeOrder(
  prisma: { $transaction<T>(fn: (tx: PrismaTx & { order: { create(args: { data: { item: string } }): Promise<unknown> } }) => Promise<T>): Promise<T> },
  dialect: DialectName,
  item: string,
): Promise<number> {
  return prisma.$transaction(async (tx) => {
    await tx.order.create({ data: { item } });
    return enqueue("ship", { item }, { db: jobsIn(tx, dialect) });
  });
}
