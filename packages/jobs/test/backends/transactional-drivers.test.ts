import Database from "better-sqlite3";
import mysql from "mysql2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueMany, getJob, pendingCount, processOne, runWorker } from "../../src/index.js";
import { backends, deferred, MYSQL_URL, waitFor, type TestDatabase } from "../helpers/backends.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
        jobs = enqueueMany(
          Array.from({ length: 500 }, (_, i) => ({ task: "ship", payload: { i } })),
          { db: app, queue: "many" },
        );
        throw new Error("abort");
      })(),
    ).toThrow("abort");
    expect(await jobs).toHaveLength(500);
    expect(await pendingCount({ db: t.db, queue: "many" })).toBe(0);

    app.transaction(() => {
      jobs = enqueueMany(
        Array.from({ length: 500 }, (_, i) => ({ task: "ship", payload: { i } })),
        { db: app, queue: "many" },
      );
    })();
    const ids = await jobs;
    expect(await pendingCount({ db: t.db, queue: "many" })).toBe(500);
    expect((await getJob(ids[499]!, { db: t.db }))!.payload).toEqual({ i: 499 });
  });

  // (audit 12.9) A worker in the same process, on the same handle, must never claim inside the
  // application's open transaction: the job it would run may still be rolled back.
  it("(audit 12.9) processOne on the handle while the application's transaction is open claims nothing", async () => {
    const ran: number[] = [];
    app.exec("BEGIN");
    let id: number;
    let claimed: boolean;
    try {
      id = await enqueue("ship", { n: 1 }, { db: app, queue: "open-tx" });
      claimed = await processOne({ ship: (p: { n: number }) => ran.push(p.n) }, { db: app, queue: "open-tx" });
    } finally {
      app.exec("ROLLBACK");
    }
    expect(claimed).toBe(false);
    expect(ran).toEqual([]);
    expect(await getJob(id, { db: t.db })).toBeNull();
    expect(app.inTransaction).toBe(false);
  });

  it("(audit 12.9) a worker on the handle waits for the application's transaction: a rolled-back job never runs, a committed one runs after the commit", async () => {
    const ran: string[] = [];
    const stop = new AbortController();
    const idle = deferred();
    const worker = runWorker(
      { ship: (p: { name: string }) => void ran.push(p.name) },
      { db: app, queue: "shared", pollInterval: 0.01, signal: stop.signal, events: { "worker:idle": () => idle.resolve() } },
    );
    try {
      await idle.promise;
      app.exec("BEGIN");
      await enqueue("ship", { name: "rolled back" }, { db: app, queue: "shared" });
      // Twenty polls and the local wake-up: time enough for a worker that claims inside the transaction to run it.
      // A bounded observation window, time-based on purpose: it proves an absence (no run), with no signal.
      await sleep(200);
      expect(ran).toEqual([]);
      app.exec("ROLLBACK");

      app.exec("BEGIN");
      const committed = await enqueue("ship", { name: "committed" }, { db: app, queue: "shared" });
      // The same observation window, before the COMMIT.
      await sleep(200);
      expect(ran).toEqual([]);
      app.exec("COMMIT");
      await waitFor("the committed job done", async () => (await getJob(committed, { db: t.db }))?.status === "done");
      expect(ran).toEqual(["committed"]);
    } finally {
      if (app.inTransaction) app.exec("ROLLBACK");
      stop.abort();
      await worker;
    }
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
