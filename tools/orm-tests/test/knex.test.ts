import knexFactory, { type Knex } from "knex";
import { describe, expect, it } from "vitest";
import { getJob } from "@forge/jobs";
import { jobsIn, placeOrder } from "../examples/knex.js";
import { describeOrm } from "../src/conformance.js";
import { backends, createTarget, type Target } from "../src/targets.js";

function knexFor(t: Target): Knex {
  if (t.backend === "postgres") return knexFactory({ client: "pg", connection: t.url, pool: { min: 0, max: 4 } });
  if (t.backend === "mysql") return knexFactory({ client: "mysql2", connection: t.url, pool: { min: 0, max: 4 } });
  return knexFactory({ client: "better-sqlite3", connection: { filename: t.file }, useNullAsDefault: true });
}

for (const backend of backends()) {
  describeOrm("Knex", backend, async (t) => {
    const knex = knexFor(t);
    return {
      transaction: (fn, isolation) =>
        knex.transaction(
          (trx) => fn({ jobs: jobsIn(trx, backend), addOrder: async (item) => void (await trx("orders").insert({ item })) }),
          isolation ? { isolationLevel: isolation } : undefined,
        ),
      close: () => knex.destroy(),
    };
  });

  describe(`the README's Knex example on ${backend}`, () => {
    it("placeOrder publishes the order and its job", async () => {
      const t = await createTarget(backend);
      const knex = knexFor(t);
      try {
        const id = await placeOrder(knex, backend, "pen");
        expect(await t.orders()).toEqual(["pen"]);
        expect(await getJob(id, { db: t.queue })).toMatchObject({ task: "ship", payload: { item: "pen" } });
      } finally {
        await knex.destroy();
        await t.drop();
      }
    });
  });
}
