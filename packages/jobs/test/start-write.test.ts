// The start write of buffered jobs (start.ts): a caller reads one side of it — `sent` or
// `owned` — and the other must never surface as an unhandled rejection when the connection is
// lost (it ended a worker process during a network cut).
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgOrderedSender } from "../src/db/pg-ordered-sender.js";
import { sendStarts } from "../src/run/start.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

const postgres = backends().find((b) => b.name === "postgres");

describe.skipIf(!postgres)("a start write whose connection fails", () => {
  let t: TestDatabase;
  beforeAll(async () => (t = await postgres!.create()));
  afterAll(() => t?.close());

  it("rejects the side the caller reads, and leaves no unhandled rejection behind", async () => {
    // Nothing listens on port 1: the sender's own connection fails at once.
    const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:1/test", connectionTimeoutMillis: 2000 });
    const sender = new PgOrderedSender(pool, false);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const write = sendStarts(t.db, sender, [{ id: 1, token: "00000000-0000-4000-8000-000000000000" }], 30);
      // A fresh lease reads only `sent`; after a stall only `owned`: here, `owned` alone.
      await expect(write.owned).rejects.toThrow();
      // A bounded observation window, time-based on purpose: it proves an absence (no unhandled
      // rejection of `sent`); awaiting `sent` would itself handle it.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
      await sender.close();
      await pool.end();
    }
  });
});
