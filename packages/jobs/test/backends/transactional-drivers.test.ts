import Database from "better-sqlite3";
import mysql from "mysql2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, getJob, pendingCount, processOne } from "../../src/index.js";
import { backends, MYSQL_URL, type TestDatabase } from "../helpers/backends.js";

const sqlite = backends().find((b) => b.name === "sqlite");
const mariadb = backends().find((b) => b.name === "mysql");

describe.skipIf(!sqlite)("transactional enqueue inside the application's better-sqlite3 transaction", () => {
  let t: TestDatabase;
  let app: Database.Database;
  beforeAll(async () => {
    t = await sqlite!.create();
    // The application's own connection to the queue's file: its tables and the jobs table together.
    app = new Database(t.url.slice("sqlite:".length));
    app.exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)");
  });
  afterAll(async () => {
    app?.close();
    await t?.close();
  });

  // db.transaction() runs its function synchronously (it refuses one returning a promise): the
  // INSERT must have run by the time enqueue() returns its promise, before the COMMIT.
  it("commit: the order and its job land together", async () => {
    let job!: Promise<number>;
    app.transaction(() => {
      app.prepare("INSERT INTO orders (item) VALUES (?)").run("book");
      job = enqueue("ship", { item: "book" }, { db: app, queue: "orders" });
    })();
    const id = await job;
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", payload: { item: "book" } });
    expect(await processOne({ ship: () => "shipped" }, { db: t.db, queue: "orders" })).toBe(true);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", result: "shipped" });
  });

  it("rollback: neither the order nor its job exists", async () => {
    let job!: Promise<number>;
    expect(() =>
      app.transaction(() => {
        app.prepare("INSERT INTO orders (item) VALUES (?)").run("lamp");
        job = enqueue("ship", { item: "lamp" }, { db: app, queue: "orders" });
        throw new Error("payment declined");
      })(),
    ).toThrow("payment declined");
    const id = await job; // the INSERT ran (and returned its id) before the rollback undid it
    expect(await getJob(id, { db: t.db })).toBeNull();
    expect(app.prepare("SELECT count(*) AS n FROM orders WHERE item = 'lamp'").get()).toEqual({ n: 0 });
    expect(await pendingCount({ db: t.db, queue: "orders" })).toBe(0);
  });

  it("enqueueMany inside the transaction is one statement: all jobs or none", async () => {
    let jobs!: Promise<number[]>;
    expect(() =>
      app.transaction(() => {
        jobs = enqueueMany(Array.from({ length: 500 }, (_, i) => ({ task: "ship", payload: { i } })), { db: app, queue: "many" });
        throw new Error("abort");
      })(),
    ).toThrow("abort");
    expect(await jobs).toHaveLength(500);
    expect(await pendingCount({ db: t.db, queue: "many" })).toBe(0);

    app.transaction(() => {
      jobs = enqueueMany(Array.from({ length: 500 }, (_, i) => ({ task: "ship", payload: { i } })), { db: app, queue: "many" });
    })();
    const ids = await jobs;
    expect(await pendingCount({ db: t.db, queue: "many" })).toBe(500);
    expect((await getJob(ids[499]!, { db: t.db }))!.payload).toEqual({ i: 499 });
  });
});

describe.skipIf(!mariadb)("transactional enqueue on the application's own mysql2 connection inside BEGIN", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await mariadb!.create();
  });
  afterAll(() => t?.close());

  // The callback API on purpose: the queue takes mysql2's callback and promise objects alike.
  function appConnection(): mysql.Connection {
    return mysql.createConnection({ uri: MYSQL_URL, database: t.schema });
  }

  for (const outcome of ["COMMIT", "ROLLBACK"] as const) {
    it(`${outcome}: the job is invisible to workers until the commit, and exists only after one`, async () => {
      const connection = appConnection();
      const sql = connection.promise();
      try {
        await sql.query("BEGIN");
        const id = await enqueue("welcome", { user: 7 }, { db: connection, queue: outcome });
        // From the queue's own pool: not committed yet, so neither visible nor claimable.
        expect(await getJob(id, { db: t.db })).toBeNull();
        expect(await processOne({ welcome: () => undefined }, { db: t.db, queue: outcome })).toBe(false);
        await sql.query(outcome);
        const job = await getJob(id, { db: t.db });
        if (outcome === "COMMIT") expect(job).toMatchObject({ status: "pending", payload: { user: 7 } });
        else expect(job).toBeNull();
      } finally {
        await sql.end();
      }
    });
  }
});
