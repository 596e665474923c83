import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cancelJob,
  connect,
  enqueue,
  getJob,
  heartbeat,
  listJobs,
  migrate,
  pendingCount,
  processOne,
  prune,
  reclaim,
  retryJob,
  runWorker,
  schedule,
  type JobContext,
  setLimit,
  statusCounts,
  type JobsDatabase,
} from "../src/index.js";
import { createDashboard } from "../src/dashboard/index.js";
import { backends, PG_LISTEN_URL, PG_URL, waitFor, type TestDatabase } from "./helpers/backends.js";
import { cli } from "./helpers/cli.js";

/** The stand-in replica: a database of its own on the same server, with other content. */
const REPLICA_DB = "forge_jobs_replica";
/**
 * Where the stand-in replica is reached: straight at the server, also when the run's queue goes
 * through PgBouncer (FORGE_TEST_PG_LISTEN_URL is then the direct URL), as a real replica is a
 * server of its own; PgBouncer 1.18 would refuse the `options` that make it read-only.
 */
const SERVER_URL = PG_LISTEN_URL ?? PG_URL;

/** `url` on another database, with session settings for the server (`options`). */
function onDatabase(url: string, database: string, settings?: string): string {
  const target = new URL(url);
  target.pathname = `/${database}`;
  target.search = "";
  if (settings) target.searchParams.set("options", settings);
  return target.toString();
}

/**
 * A read replica as the queue sees one: another PostgreSQL database that refuses every write
 * (default_transaction_read_only, as a hot standby does), holding different jobs than the
 * primary, so each read shows where it went and each write that strayed there fails.
 */
describe.skipIf(!backends().some((b) => b.name === "postgres"))("readUrl: display reads on a replica, writes on the primary (postgres)", () => {
  let t: TestDatabase;
  let db: JobsDatabase;
  let replicaUrl: string;
  const onReplica: number[] = [];

  beforeAll(async () => {
    t = await backends()
      .find((b) => b.name === "postgres")!
      .create();
    const admin = connect(SERVER_URL);
    try {
      await admin.executor.query(`CREATE DATABASE ${REPLICA_DB}`);
    } catch (error) {
      // Made already (by an earlier run, or a parallel one racing this).
      if (!["42P04", "23505"].includes((error as { code?: string }).code ?? "")) throw error;
    } finally {
      await admin.close();
    }
    const writable = connect(onDatabase(SERVER_URL, REPLICA_DB), { schema: t.schema! });
    try {
      await migrate({ db: writable });
      // Ids apart from the primary's, so a read by id shows which database answered.
      await writable.executor.query(`SELECT setval(pg_get_serial_sequence($1, 'id'), 1000)`, [writable.table]);
      for (let i = 0; i < 3; i++) onReplica.push(await enqueue("replica-only", { i }, { db: writable, queue: "replica-queue" }));
    } finally {
      await writable.close();
    }
    replicaUrl = onDatabase(SERVER_URL, REPLICA_DB, "-c default_transaction_read_only=on");
    db = connect(t.url, { schema: t.schema!, readUrl: replicaUrl });
  });

  afterAll(async () => {
    await db?.close();
    const admin = connect(onDatabase(SERVER_URL, REPLICA_DB));
    await admin.executor.query(`DROP SCHEMA IF EXISTS "${t.schema!}" CASCADE`).catch(() => undefined);
    await admin.close();
    await t.close();
  });

  it("the stand-in replica refuses writes, as a hot standby does (so a write that went there would fail)", async () => {
    await expect(db.forReading().executor.query(`DELETE FROM ${db.table}`)).rejects.toThrow(/read-only transaction/);
  });

  it("getJob, listJobs, pendingCount and statusCounts read the replica", async () => {
    const onPrimary = await enqueue("primary-only", null, { db, queue: "primary-queue" });
    expect((await getJob(onReplica[0]!, { db }))?.task).toBe("replica-only");
    // Staleness, as a lagging replica shows it: the job just written is not there yet.
    expect(await getJob(onPrimary, { db })).toBeNull();
    expect((await listJobs({ db })).jobs.map((j) => j.task)).toEqual(["replica-only", "replica-only", "replica-only"]);
    expect(await pendingCount({ db, queue: "replica-queue" })).toBe(3);
    expect(await pendingCount({ db, queue: "primary-queue" })).toBe(0);
    expect((await statusCounts({ db })).map((s) => [s.queue, s.counts.pending])).toEqual([["replica-queue", 3]]);
    // The primary has it, as a read of a database without readUrl shows.
    expect((await getJob(onPrimary, { db: t.db }))?.task).toBe("primary-only");
  });

  it("inside the caller's transaction (bind), reads stay on that transaction's connection", async () => {
    await t.withTransaction(async (bound) => {
      const id = await enqueue("in-transaction", null, { db: db.bind((bound.executor as { raw: unknown }).raw) });
      expect((await getJob(id, { db: db.bind((bound.executor as { raw: unknown }).raw) }))?.task).toBe("in-transaction");
    }, "rollback");
  });

  it("every write path goes to the primary: enqueue, claim, heartbeat, checkpoint, complete, fail, retry, cancel, reclaim, prune, schedules, limits, migrate", async () => {
    await migrate({ db });
    await setLimit("key-a", { concurrency: 2 }, { db });
    await schedule("nightly", "0 3 * * *", { task: "nightly-task", db });
    const ok = await enqueue("works", { n: 1 }, { db, queue: "w", concurrencyKey: "key-a" });
    const failing = await enqueue("fails", null, { db, queue: "w" });
    const cancelled = await enqueue("cancelled", null, { db, queue: "w", availableIn: 3600 });
    await cancelJob(cancelled, { db });
    const handlers = {
      works: async (_payload: unknown, ctx: JobContext) => {
        expect(await heartbeat(ctx.claimToken, { db })).toBe(true);
        expect(await ctx.checkpoint({ step: 1 })).toBe(true);
        return "ok";
      },
      fails: () => {
        throw new Error("boom");
      },
    };
    const stop = new AbortController();
    const worker = runWorker(handlers, { db, queue: "w", pollInterval: 0.05, signal: stop.signal });
    await waitFor("both jobs to end on the primary", async () => {
      const rows = await t.sql<{ status: string }>(`SELECT status FROM {all} WHERE id IN ($1, $2)`, [ok, failing]);
      return rows.length === 2 && rows.every((r) => r.status === "done" || r.status === "failed");
    });
    stop.abort();
    await worker;
    expect(await retryJob(failing, { db })).toBe(true);
    expect(await processOne({ fails: handlers.fails }, { db, queue: "w" })).toBe(true);
    expect(await reclaim({ db, lease: 0 })).toEqual([]);
    expect(await prune({ db, olderThan: 0 })).toBeGreaterThanOrEqual(2);
    const rows = await t.sql<{ task: string }>(`SELECT task FROM {all} ORDER BY id`);
    expect(rows.map((r) => r.task)).toEqual(["primary-only"]);
  });

  it("the dashboard's page reads the replica", async () => {
    const dashboard = createDashboard({ db, basePath: "/jobs" });
    const server = createServer((req, res) => void dashboard(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const body = await (await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/jobs`)).text();
      expect(body).toContain("replica-queue");
      expect(body).not.toContain("primary-queue");
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("forge-jobs status --read-url reads the replica", async () => {
    const run = (args: string[]) => cli(args, { env: { DATABASE_READ_URL: "" } });
    const common = ["--database-url", t.url, "--schema", t.schema!];
    const replica = await run(["status", "--json", ...common, "--read-url", replicaUrl]);
    expect(replica.stderr).toBe("");
    expect((JSON.parse(replica.stdout) as { queue: string }[]).map((s) => s.queue)).toEqual(["replica-queue"]);
    const primary = await run(["status", "--json", ...common]);
    expect((JSON.parse(primary.stdout) as { queue: string }[]).map((s) => s.queue)).not.toContain("replica-queue");
  });
});
