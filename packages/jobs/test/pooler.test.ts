import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, createWorker, enqueue, enqueueMany, getJob, JobError, migrate, runWorker, type JobsDatabase, type Logger } from "../src/index.js";
import { fromDriver } from "../src/core/connect.js";
import { allJobs, backends, deferred, MYSQL_URL, PG_LISTEN_URL, PG_URL, uniqueName, waitFor } from "./helpers/backends.js";

const SCRIPT = fileURLToPath(new URL("../../../tools/test-services/pgbouncer.sh", import.meta.url));
const BIN = fileURLToPath(new URL("../bin/forge-jobs.cjs", import.meta.url));
const PORT = process.env.FORGE_PGBOUNCER_PORT ?? "16432";
/** PgBouncer in transaction mode (tools/test-services/pgbouncer.sh), declared by Prisma's URL parameter. */
const POOLED_URL = `postgres://postgres@127.0.0.1:${PORT}/test?pgbouncer=true`;
/** Straight to the server, whichever URL the run's other tests use. */
const DIRECT_URL = PG_LISTEN_URL ?? PG_URL;

const postgres = backends().some((b) => b.name === "postgres");
const installed = existsSync("/usr/sbin/pgbouncer") || existsSync("/usr/bin/pgbouncer");
// In CI, .ci/run installs and starts PgBouncer: its absence there is a failure, not a skip.
const runnable = postgres && (installed || process.env.CI === "true");
if (postgres && !runnable) console.warn("forge tests: pgbouncer is not installed; the PgBouncer tests are skipped (apt-get install pgbouncer)");

/** Records the name of every statement pg sends, named (prepared) or not, while `fn` runs. */
async function statementNames(fn: () => Promise<void>): Promise<(string | undefined)[]> {
  const names: (string | undefined)[] = [];
  // A property holding a function (not a method): replaced and put back around `fn`.
  const proto = pg.Client.prototype as unknown as { query: (this: pg.Client, ...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: pg.Client, config: unknown, ...rest: unknown[]) {
    if (typeof config === "object" && config !== null) names.push((config as { name?: string }).name);
    return original.call(this, config, ...rest);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return names;
}

function capture(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const log = (_obj: object, msg?: string) => void lines.push(msg ?? "");
  return { logger: { debug: log, info: log, warn: log, error: log }, lines };
}

describe.skipIf(!runnable)("through PgBouncer in transaction mode (postgres)", () => {
  const schema = uniqueName("pgb");
  const opened: JobsDatabase[] = [];
  const open = (url: string, options: Parameters<typeof connect>[1] = {}) => {
    const db = connect(url, { schema, poolSize: 4, ...options });
    opened.push(db);
    return db;
  };

  beforeAll(async () => {
    execFileSync(SCRIPT, ["start"], { stdio: "inherit" });
    await migrate({ db: open(POOLED_URL) });
  });

  afterAll(async () => {
    const direct = connect(DIRECT_URL);
    await direct.executor.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await direct.close();
    await Promise.all(opened.map((db) => db.close()));
  });

  it("sends no named prepared statement (each transaction may land on another server connection); directly, it does", async () => {
    const work = (db: JobsDatabase, queue: string) => async () => {
      await enqueueMany(
        Array.from({ length: 40 }, (_, i) => ({ task: "add", payload: { i } })),
        { db, queue },
      );
      await enqueue("add", { i: 40 }, { db, queue });
      const stop = new AbortController();
      const worker = runWorker({ add: () => "ok" }, { db, queue, concurrency: 8, pollInterval: 0.05, signal: stop.signal });
      await waitFor(
        "41 jobs done",
        async () =>
          (await db.executor.query<{ n: string }>(`SELECT count(*) AS n FROM ${allJobs(db)} WHERE queue = $1 AND status = 'done'`, [queue])).rows[0]!.n ===
          "41",
      );
      stop.abort();
      await worker;
    };
    const pooled = await statementNames(work(open(POOLED_URL), "pooled"));
    expect(pooled.length).toBeGreaterThan(10);
    expect(pooled.filter((name) => name !== undefined)).toEqual([]);
    // The same work straight to the server prepares its hot statements (so the check above can fail).
    const direct = await statementNames(work(open(DIRECT_URL), "direct"));
    expect(direct.filter((name) => name !== undefined).length).toBeGreaterThan(0);
  });

  it("without listenUrl, a worker polls and says so in one line at start", async () => {
    const db = open(POOLED_URL);
    expect(db.executor.listen ? "listens" : "polls").toBe("polls");
    const { logger, lines } = capture();
    const stop = new AbortController();
    const done = deferred();
    const worker = createWorker({ ping: () => done.resolve() }, { db, queue: "polled", pollInterval: 0.2, logger, signal: stop.signal });
    const idle = deferred();
    worker.on("worker:idle", () => idle.resolve());
    const running = worker.run();
    await idle.promise;
    await enqueue("ping", null, { db, queue: "polled" });
    await done.promise;
    stop.abort();
    await running;
    const notices = lines.filter((line) => line.includes("transaction pooler"));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/polls .*listenUrl/);
  });

  it("with listenUrl, an idle worker is woken at once (its LISTEN goes straight to the server), long before its poll interval", async () => {
    const listenUrl = new URL(DIRECT_URL);
    listenUrl.searchParams.set("application_name", `${schema}-listen`);
    const db = open(POOLED_URL, { listenUrl: listenUrl.toString() });
    const { logger, lines } = capture();
    const stop = new AbortController();
    const started = deferred<number>();
    const worker = createWorker({ ping: () => started.resolve(Date.now()) }, { db, queue: "woken", pollInterval: 60, logger, signal: stop.signal });
    const idle = deferred();
    worker.on("worker:idle", () => idle.resolve());
    const running = worker.run();
    await idle.promise;
    // The LISTEN connection is the one opened from listenUrl (named by its application_name).
    const direct = open(DIRECT_URL);
    const { rows } = await direct.executor.query<{ query: string }>(`SELECT query FROM pg_stat_activity WHERE application_name = $1`, [`${schema}-listen`]);
    expect(rows.map((r) => r.query)).toEqual([`LISTEN "${db.channel}"`]);
    const enqueuedAt = Date.now();
    const id = await enqueue("ping", null, { db, queue: "woken" });
    expect((await started.promise) - enqueuedAt).toBeLessThan(5_000);
    stop.abort();
    await running;
    expect((await getJob(id, { db }))?.status).toBe("done");
    expect(lines.filter((line) => line.includes("transaction pooler"))).toEqual([]);
  });

  it('pooler: "none" overrides the URL\'s pgbouncer=true (a session-mode pooler keeps LISTEN and prepared statements)', () => {
    expect(open(POOLED_URL, { pooler: "none" }).executor.listen ? "listens" : "polls").toBe("listens");
    expect(open(DIRECT_URL, { pooler: "transaction" }).executor.listen ? "listens" : "polls").toBe("polls");
  });

  it("forge-jobs worker --listen-url: the CLI worker behind the pooler is woken through the direct URL", async () => {
    const dir = mkdtempSync(join(tmpdir(), "forge-pooler-cli-"));
    const handlers = join(dir, "handlers.mjs");
    writeFileSync(handlers, "export default { ping: () => 'pong' };\n");
    const listenUrl = new URL(DIRECT_URL);
    listenUrl.searchParams.set("application_name", `${schema}-cli`);
    const args = [
      BIN,
      "worker",
      handlers,
      "--queue",
      "cli",
      "--poll",
      "60",
      "--database-url",
      POOLED_URL,
      "--schema",
      schema,
      "--listen-url",
      listenUrl.toString(),
    ];
    const child = spawn(process.execPath, args, { env: { ...process.env, DATABASE_URL: "" }, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise((resolve) => child.on("close", resolve));
    try {
      const direct = open(DIRECT_URL);
      await waitFor("the CLI worker's LISTEN", async () => {
        const { rows } = await direct.executor.query<{ query: string }>(`SELECT query FROM pg_stat_activity WHERE application_name = $1`, [`${schema}-cli`]);
        return rows.some((r) => r.query.startsWith("LISTEN"));
      });
      const db = open(POOLED_URL);
      const id = await enqueue("ping", null, { db, queue: "cli" });
      // Far below the 60 s poll: only a wake-up brings it this soon.
      await waitFor("the job done by the CLI worker", async () => (await getJob(id, { db }))?.status === "done", 10_000);
    } finally {
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
    expect(stderr).not.toContain("transaction pooler");
  });

  it("a pg Pool of the application's, made from a URL with pgbouncer=true, is taken as pooled too", async () => {
    const pool = new pg.Pool({ connectionString: POOLED_URL, max: 2 });
    try {
      const db = fromDriver(pool, { schema });
      expect(db.executor.listen ? "listens" : "polls").toBe("polls");
      const names = await statementNames(async () => {
        await enqueue("add", null, { db, queue: "app-pool" });
      });
      expect(names.filter((name) => name !== undefined)).toEqual([]);
    } finally {
      await pool.end();
    }
  });
});

describe("connect options for poolers and replicas: bad input is refused, nothing opened", () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), "forge-pooler-"))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("a pooler that is not none or transaction", () => {
    expect(() => connect(PG_URL, { pooler: "session" as never })).toThrow(JobError);
    expect(() => connect(PG_URL, { pooler: "session" as never })).toThrow(/pooler must be "none" or "transaction"/);
  });

  it("a listenUrl or readUrl that is not a PostgreSQL URL, with any password in it redacted", () => {
    expect(() => connect(PG_URL, { listenUrl: "mysql://root:hunter2@db/x" })).toThrow(/listenUrl must be a postgres:\/\/.*root:\*\*\*@/);
    expect(() => connect(PG_URL, { readUrl: "mysql://root:hunter2@db/x" })).toThrow(/readUrl must be a postgres:\/\/.*root:\*\*\*@/);
    expect(() => connect(PG_URL, { readUrl: 42 as never })).toThrow(/readUrl must be .* got number/);
  });

  it("PostgreSQL's options on SQLite or MariaDB: an error, and no SQLite file is created", () => {
    const file = join(dir, "jobs.db");
    for (const options of [{ listenUrl: PG_URL }, { readUrl: PG_URL }, { pooler: "transaction" as const }]) {
      expect(() => connect(`sqlite:${file}`, options)).toThrow(/is a PostgreSQL option; this database is sqlite/);
      expect(() => connect(MYSQL_URL, options)).toThrow(/is a PostgreSQL option; this database is mysql/);
    }
    expect(existsSync(file)).toBe(false);
  });
});
