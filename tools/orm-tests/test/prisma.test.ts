import { PrismaBetterSqlite3 } from "@prisma/adapter-better-sqlite3";
import { PrismaMariaDb } from "@prisma/adapter-mariadb";
import { PrismaPg } from "@prisma/adapter-pg";
import { describe, expect, it } from "vitest";
import { getJob } from "@forge/jobs";
import { jobsIn, placeOrder } from "../examples/prisma.js";
import { describeOrm } from "../src/conformance.js";
import { backends, createTarget, type Target } from "../src/targets.js";
import { PrismaClient as MysqlClient } from "../generated/mysql/client.js";
import { PrismaClient as PgClient } from "../generated/postgresql/client.js";
import { PrismaClient as SqliteClient } from "../generated/sqlite/client.js";

/** The three generated clients differ only in their provider: one shape is enough here. */
type Client = InstanceType<typeof PgClient>;

function prismaFor(t: Target): Client {
  if (t.backend === "postgres") return new PgClient({ adapter: new PrismaPg({ connectionString: t.url, max: 4 }) });
  if (t.backend === "sqlite") return new SqliteClient({ adapter: new PrismaBetterSqlite3({ url: `file:${t.file}` }) }) as unknown as Client;
  const url = new URL(t.url);
  const adapter = new PrismaMariaDb({
    host: url.hostname,
    port: Number(url.port || 3306),
    user: url.username,
    database: url.pathname.slice(1),
    connectionLimit: 4,
  });
  return new MysqlClient({ adapter }) as unknown as Client;
}

// Interactive transactions time out after 5 s by default; a slow CI machine needs more.
const LIMITS = { timeout: 20_000, maxWait: 10_000 };

for (const backend of backends()) {
  describeOrm("Prisma", backend, async (t) => {
    const prisma = prismaFor(t);
    return {
      transaction: (fn, isolation) =>
        prisma.$transaction(
          (tx) => fn({ jobs: jobsIn(tx, backend), addOrder: async (item) => void (await tx.order.create({ data: { item } })) }),
          isolation ? { ...LIMITS, isolationLevel: isolation === "read committed" ? "ReadCommitted" : "RepeatableRead" } : LIMITS,
        ),
      close: () => prisma.$disconnect(),
    };
  });

  describe(`the README's Prisma example on ${backend}`, () => {
    it("placeOrder publishes the order and its job", async () => {
      const t = await createTarget(backend);
      const prisma = prismaFor(t);
      try {
        const id = await placeOrder(prisma, backend, "pen");
        expect(await t.orders()).toEqual(["pen"]);
        expect(await getJob(id, { db: t.queue })).toMatchObject({ task: "ship", payload: { item: "pen" } });
      } finally {
        await prisma.$disconnect();
        await t.drop();
      }
    });
  });
}
