import { DataSource, type EntityManager } from "typeorm";
import { describe, expect, it } from "vitest";
import { getJob } from "@forge/jobs";
import { jobsIn, Order, placeOrder } from "../examples/typeorm.js";
import { describeOrm } from "../src/conformance.js";
import { backends, createTarget, type Target } from "../src/targets.js";

async function dataSourceFor(t: Target): Promise<DataSource> {
  const options =
    t.backend === "postgres"
      ? ({ type: "postgres", url: t.url, poolSize: 4 } as const)
      : t.backend === "mysql"
        ? ({ type: "mariadb", url: t.url, poolSize: 4 } as const)
        : ({ type: "better-sqlite3", database: t.file } as const);
  return new DataSource({ ...options, entities: [Order] }).initialize();
}

for (const backend of backends()) {
  describeOrm("TypeORM", backend, async (t) => {
    const dataSource = await dataSourceFor(t);
    const tx = (manager: EntityManager) => ({ jobs: jobsIn(manager, backend), addOrder: async (item: string) => void (await manager.insert(Order, { item })) });
    return {
      transaction: (fn, isolation) =>
        isolation
          ? dataSource.transaction(isolation === "read committed" ? "READ COMMITTED" : "REPEATABLE READ", (manager) => fn(tx(manager)))
          : dataSource.transaction((manager) => fn(tx(manager))),
      close: () => dataSource.destroy(),
    };
  });

  describe(`the README's TypeORM example on ${backend}`, () => {
    it("placeOrder publishes the order and its job", async () => {
      const t = await createTarget(backend);
      const dataSource = await dataSourceFor(t);
      try {
        const id = await placeOrder(dataSource, backend, "pen");
        expect(await t.orders()).toEqual(["pen"]);
        expect(await getJob(id, { db: t.queue })).toMatchObject({ task: "ship", payload: { item: "pen" } });
      } finally {
        await dataSource.destroy();
        await t.drop();
      }
    });
  });
}
