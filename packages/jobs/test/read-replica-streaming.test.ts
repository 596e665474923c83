import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, enqueue, getJob, listJobs, migrate, processOne, statusCounts, type JobsDatabase } from "../src/index.js";
import { backends, uniqueName, waitFor } from "./helpers/backends.js";

const SCRIPT = fileURLToPath(new URL("../../../tools/test-services/pg-replica.sh", import.meta.url));
const PRIMARY_URL = `postgres://postgres@127.0.0.1:${process.env.FORGE_REPLICA_PRIMARY_PORT ?? "16433"}/test`;
const REPLICA_URL = `postgres://postgres@127.0.0.1:${process.env.FORGE_REPLICA_PORT ?? "16434"}/test`;

const postgres = backends().some((b) => b.name === "postgres");
const serverBinaries = existsSync("/usr/lib/postgresql") && readdirSync("/usr/lib/postgresql").some((v) => existsSync(`/usr/lib/postgresql/${v}/bin/initdb`));
const runnable = postgres && (serverBinaries || process.env.CI === "true");
if (postgres && !runnable) console.warn("forge tests: no PostgreSQL server binaries (initdb); the streaming replica test is skipped");

/**
 * A real streaming replica (hot standby) of a private primary (tools/test-services/pg-replica.sh):
 * replay paused on it, a read through readUrl is as stale as the replica, and the standby's own
 * refusal of writes proves none of the worker's went there.
 */
describe.skipIf(!runnable)("readUrl on a streaming replica (postgres)", () => {
  const schema = uniqueName("rep");
  let db: JobsDatabase;
  let replica: JobsDatabase;

  beforeAll(async () => {
    execFileSync(SCRIPT, ["start"], { stdio: "inherit" });
    db = connect(PRIMARY_URL, { schema, readUrl: REPLICA_URL });
    replica = connect(REPLICA_URL);
    await migrate({ db });
    await waitFor("the schema on the replica", async () => (await replica.executor.query(`SELECT to_regclass($1) AS t`, [db.table])).rows[0]!.t);
  }, 300_000);

  afterAll(async () => {
    await replica?.executor.query("SELECT pg_wal_replay_resume()").catch(() => undefined);
    await db?.executor.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await Promise.all([db?.close(), replica?.close()]);
  });

  it("the replica is a hot standby: it refuses writes", async () => {
    expect((await replica.executor.query<{ r: boolean }>("SELECT pg_is_in_recovery() AS r")).rows[0]!.r).toBe(true);
    await expect(db.forReading().executor.query(`DELETE FROM ${db.table}`)).rejects.toThrow(/read-only transaction/);
  });

  it("reads lag while the replica's replay is paused, and catch up once it resumes; writes go on meanwhile", async () => {
    await replica.executor.query("SELECT pg_wal_replay_pause()");
    try {
      const id = await enqueue("lagging", null, { db, queue: "stale" });
      expect(await getJob(id, { db })).toBeNull();
      expect((await statusCounts({ db, queue: "stale" }))[0]!.counts.pending).toBe(0);
      // Claim and completion: on the primary (the standby would refuse both).
      expect(await processOne({ lagging: () => "ok" }, { db, queue: "stale" })).toBe(true);
      expect((await db.executor.query<{ status: string }>(`SELECT status FROM ${db.historyTable} WHERE id = $1`, [id])).rows[0]!.status).toBe("done");
      expect((await listJobs({ db, queue: "stale" })).jobs).toEqual([]);
      await replica.executor.query("SELECT pg_wal_replay_resume()");
      await waitFor("the replica to replay the job's end", async () => (await getJob(id, { db }))?.status === "done");
      expect((await statusCounts({ db, queue: "stale" }))[0]!.counts.done).toBe(1);
    } finally {
      await replica.executor.query("SELECT pg_wal_replay_resume()").catch(() => undefined);
    }
  });
});
