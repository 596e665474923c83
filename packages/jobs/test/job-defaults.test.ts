// maxAttempts' default (issue 34.6): 1 unless the database says otherwise. `jobDefaults` of
// connect() gives every queue, or one queue, another default; an enqueue's own value wins; a bad
// value is refused when the database is made, before anything is opened or written.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connect,
  enqueue,
  enqueueBatch,
  enqueueMany,
  fromQuery,
  getJob,
  JobError,
  reclaim,
  schedule,
  triggerSchedule,
  WORKER_LOST_PREFIX,
  type ConnectOptions,
  type JobsDatabase,
} from "../src/index.js";
import { claimJobs } from "../src/run/claim.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

const DEFAULTS: ConnectOptions["jobDefaults"] = { maxAttempts: 3, queues: { mails: { maxAttempts: 5 }, plain: {} } };

describe.each(backends())("maxAttempts' default ($name)", (backend) => {
  let t: TestDatabase;
  let db: JobsDatabase;
  beforeAll(async () => {
    t = await backend.create();
    db = connect(t.url, { schema: t.schema, jobDefaults: DEFAULTS });
  });
  afterAll(async () => {
    await db?.close();
    await t.close();
  });

  const maxAttemptsOf = async (id: number) => (await getJob(id, { db: t.db }))!.maxAttempts;

  /** Takes the job as a worker that starts its handler and is then killed, and sweeps it back. */
  async function killWorkerMidRun(queue: string): Promise<void> {
    const { jobs } = await claimJobs(t.db, { queues: [queue], limit: 1, start: 1, lease: 60, workerId: "killed-worker" });
    expect(jobs).toHaveLength(1);
    expect(await reclaim({ db: t.db, lease: 0, queue })).toHaveLength(1);
  }

  it("is 1 without jobDefaults: a job whose worker was killed mid-run ends failed, worker lost", async () => {
    const id = await enqueue("invoice", null, { db: t.db, queue: "no-defaults" });
    expect(await maxAttemptsOf(id)).toBe(1);
    await killWorkerMidRun("no-defaults");
    const job = await getJob(id, { db: t.db });
    expect(job).toMatchObject({ status: "failed", attempts: 1, maxAttempts: 1 });
    expect(job!.lastError).toMatch(new RegExp(`^${WORKER_LOST_PREFIX}: attempt 1 of 1 held by killed-worker`));
  });

  it("with jobDefaults, the same job goes back to pending for another run", async () => {
    const id = await enqueue("invoice", null, { db, queue: "with-defaults" });
    expect(await maxAttemptsOf(id)).toBe(3);
    await killWorkerMidRun("with-defaults");
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "pending", attempts: 1, maxAttempts: 3 });
  });

  it("enqueue: the queue's entry, else every queue's default; an explicit value wins", async () => {
    expect(await maxAttemptsOf(await enqueue("t", null, { db }))).toBe(3);
    expect(await maxAttemptsOf(await enqueue("t", null, { db, queue: "mails" }))).toBe(5);
    // An entry without maxAttempts leaves the queue on every queue's default.
    expect(await maxAttemptsOf(await enqueue("t", null, { db, queue: "plain" }))).toBe(3);
    expect(await maxAttemptsOf(await enqueue("t", null, { db, queue: "mails", maxAttempts: 2 }))).toBe(2);
    expect(await maxAttemptsOf(await enqueue("t", null, { db, maxAttempts: 1 }))).toBe(1);
  });

  it("bind(client) keeps the defaults: a transactional enqueue gets them too", async () => {
    // The same transaction's client, bound to the database that has jobDefaults.
    const id = await t.withTransaction((bound) => enqueue("t", null, { db: db.bind(bound.executor.raw), queue: "mails" }), "commit");
    expect(await maxAttemptsOf(id)).toBe(5);
  });

  it("enqueueMany and enqueueBatch: per item, by the item's queue", async () => {
    const ids = await enqueueMany(
      [
        { task: "t" },
        { task: "t", queue: "default" },
        { task: "t", maxAttempts: 7 },
        { task: "t", queue: "reports", ref: "a" },
        { task: "t", dependsOn: ["a"] },
      ],
      { db, queue: "mails" },
    );
    expect(await Promise.all(ids.map(maxAttemptsOf))).toEqual([5, 3, 7, 3, 5]);
    const batch = await enqueueBatch([{ task: "t" }, { task: "t", maxAttempts: 2 }], { db, queue: "mails", onComplete: { task: "done" } });
    expect(await Promise.all([...batch.ids, batch.callbackId!].map(maxAttemptsOf))).toEqual([5, 2, 5]);
  });

  it("a schedule's runs take the defaults of the database that enqueues them", async () => {
    await schedule("defaults-report", "0 3 * * *", { task: "report", queue: "mails", db });
    expect(await maxAttemptsOf(await triggerSchedule("defaults-report", { db }))).toBe(5);
  });

  it("fromQuery takes jobDefaults too", async () => {
    // The driver's own pool (or, on SQLite, a handle of the application's), answering in its own shape, as an ORM's raw call does.
    const sqlite = t.db.dialect === "sqlite" ? new Database(t.url.slice("sqlite:".length)) : null;
    const pool = t.db.executor.raw as { query(sql: string, params: unknown[]): Promise<unknown> };
    const query = (sql: string, params: unknown[]) => {
      if (!sqlite) return pool.query(sql, params) as never;
      const statement = sqlite.prepare(sql);
      return statement.reader ? statement.all(...params) : statement.run(...params);
    };
    try {
      const viaQuery = fromQuery({ dialect: t.db.dialect, query }, { schema: t.schema, jobDefaults: { maxAttempts: 4 } });
      expect(await maxAttemptsOf(await enqueue("t", null, { db: viaQuery }))).toBe(4);
    } finally {
      sqlite?.close();
    }
  });

  it("an explicit bad maxAttempts is still a JobError, nothing written", async () => {
    const before = await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all}");
    await expect(enqueue("t", null, { db, queue: "mails", maxAttempts: 0 })).rejects.toThrow(/^maxAttempts must be an integer from 1 to 1000000, got 0$/);
    expect(await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all}")).toEqual(before);
  });

  const bad: [string, unknown, RegExp][] = [
    ["not an object", 3, /^connect: jobDefaults must be an object such as \{ maxAttempts: 3 \}, got 3$/],
    ["zero", { maxAttempts: 0 }, /^jobDefaults\.maxAttempts must be an integer from 1 to 1000000, got 0$/],
    ["a fraction", { maxAttempts: 1.5 }, /^jobDefaults\.maxAttempts must be an integer from 1 to 1000000, got 1\.5$/],
    ["a string", { maxAttempts: "3" }, /^jobDefaults\.maxAttempts must be an integer from 1 to 1000000, got "3"$/],
    ["a misspelt key", { maxAttempt: 3 }, /^connect: jobDefaults: unknown option "maxAttempt"; allowed: maxAttempts, queues$/],
    [
      "queues as a list",
      { queues: ["mails"] },
      /^connect: jobDefaults\.queues must be an object keyed by queue name, such as \{ mails: \{ maxAttempts: 5 \} \}, got an array$/,
    ],
    ["a queue given a number", { queues: { mails: 5 } }, /^connect: jobDefaults\.queues\["mails"\] must be an object such as \{ maxAttempts: 5 \}, got 5$/],
    ["a queue's zero", { queues: { mails: { maxAttempts: 0 } } }, /^jobDefaults\.queues\["mails"\]\.maxAttempts must be an integer from 1 to 1000000, got 0$/],
    [
      "a queue's misspelt key",
      { queues: { mails: { attempts: 2 } } },
      /^connect: jobDefaults\.queues\["mails"\]: unknown option "attempts"; allowed: maxAttempts, deadLetter, priorityAging$/,
    ],
    ["an empty queue name", { queues: { "": { maxAttempts: 2 } } }, /^jobDefaults\.queues\[""\]: a queue name must be a non-empty string, got ""$/],
  ];

  it.each(bad)("a bad jobDefaults (%s) is a JobError from connect, before anything is opened", (_name, value, message) => {
    const folder = mkdtempSync(path.join(tmpdir(), "forge-job-defaults-"));
    try {
      const file = path.join(folder, "jobs.db");
      const url = backend.name === "sqlite" ? `sqlite:${file}` : t.url;
      let error: unknown;
      try {
        connect(url, { schema: t.schema, jobDefaults: value as never });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(JobError);
      expect((error as Error).message).toMatch(message);
      // Nothing opened: an SQLite file would have been created on opening.
      expect(existsSync(file)).toBe(false);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("fromQuery refuses a bad jobDefaults the same way", () => {
    expect(() => fromQuery({ dialect: t.db.dialect, query: () => Promise.resolve([]) }, { jobDefaults: { maxAttempts: -1 } })).toThrow(
      /^jobDefaults\.maxAttempts must be an integer from 1 to 1000000, got -1$/,
    );
  });
});
