// waitForJob (issue 36.6): resolves with the ended job wherever it is kept. PostgreSQL wakes it
// with a NOTIFY sent only for awaited jobs; SQLite and MariaDB with an in-process wake-up, and
// by polling when another process ends the job. Each timing bound below sits between the push
// and the next poll, so a missing push fails it.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, drain, enqueue, JobError, JobWaitTimeoutError, processOne, waitForJob, type JobsDatabase } from "../src/index.js";
import { backends, PG_LISTEN_URL, PG_URL, waitFor, type TestDatabase } from "./helpers/backends.js";

const tsx = createRequire(import.meta.url).resolve("tsx");
const finisher = fileURLToPath(new URL("./fixtures/finish-job.ts", import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function finishInChild(t: TestDatabase, queue: string): Promise<void> {
  const child = spawn(process.execPath, ["--import", tsx, finisher, t.url, t.schema ?? "-", queue], { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()));
  return new Promise((resolve, reject) => child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`child exited ${code}: ${err}`)))));
}

describe.each(backends())("waitForJob ($name)", (backend) => {
  let t: TestDatabase;
  /** Another connection (pool) to the same queue, in this process: where the job is ended. */
  let other: JobsDatabase;

  beforeAll(async () => {
    t = await backend.create();
    other = connect(t.url, t.schema ? { schema: t.schema } : {});
  });
  afterAll(async () => {
    await other?.close();
    await t?.close();
  });

  /** Waits until a waitForJob call has subscribed (and, on PostgreSQL, flagged the job). */
  async function subscribed(id: number): Promise<void> {
    if (backend.name === "postgres")
      await waitFor("the awaited flag", async () => (await t.sql<{ awaited: unknown }>("SELECT awaited FROM {jobs} WHERE id = $1", [id]))[0]?.awaited === true);
    else await sleep(200);
  }

  it("resolves with the finished job and its result, woken at once when another connection of this process ends it", async () => {
    const id = await enqueue("finish", { n: 1 }, { db: t.db, queue: "woken" });
    const waiting = waitForJob(id, { db: t.db });
    await subscribed(id);
    // Past the first polls: the next one is seconds away, so only a wake-up can be this quick.
    await sleep(backend.name === "postgres" ? 0 : 3_600);
    expect(await processOne({ finish: () => ({ ok: true }) }, { db: other, queue: "woken" })).toBe(true);
    const endedAt = Date.now();
    const job = await waiting;
    expect(Date.now() - endedAt).toBeLessThan(2_500);
    expect(job).toMatchObject({ id, status: "done", result: { ok: true } });
  });

  it("resolves when another process ends the job (PostgreSQL: its NOTIFY; elsewhere: polling)", async () => {
    const id = await enqueue("finish", null, { db: t.db, queue: "child" });
    const waiting = waitForJob(id, { db: t.db, timeout: 30 });
    await subscribed(id);
    await finishInChild(t, "child");
    const endedAt = Date.now();
    const job = await waiting;
    expect(job).toMatchObject({ id, status: "done", result: { by: "child" } });
    // PostgreSQL's fallback poll is 5 s apart: the NOTIFY is what comes sooner.
    expect(Date.now() - endedAt).toBeLessThan(backend.name === "postgres" ? 3_000 : 6_000);
  });

  it("a failed job resolves with status failed and its error; a job already in history at once", async () => {
    const id = await enqueue("boom", null, { db: t.db, queue: "failing" });
    const waiting = waitForJob(id, { db: t.db });
    await subscribed(id);
    await drain({ boom: () => Promise.reject(new Error("kaboom")) }, { db: other, queue: "failing" });
    const job = await waiting;
    expect(job.status).toBe("failed");
    expect(job.lastError).toContain("kaboom");
    const startedAt = Date.now();
    expect((await waitForJob(id, { db: t.db })).status).toBe("failed");
    expect(Date.now() - startedAt).toBeLessThan(1_000);
  });

  it("timeout: rejects with JobWaitTimeoutError carrying the job as last read", async () => {
    const id = await enqueue("never", null, { db: t.db, queue: "idle" });
    const startedAt = Date.now();
    const error = await waitForJob(id, { db: t.db, timeout: 0.3 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobWaitTimeoutError);
    expect((error as JobWaitTimeoutError).job).toMatchObject({ id, status: "pending" });
    expect((error as Error).message).toMatch(`job ${id} did not finish within the timeout`);
    expect(Date.now() - startedAt).toBeLessThan(3_000);
  });

  it("signal: an abort rejects with the signal's reason; an aborted signal before the call too", async () => {
    const id = await enqueue("never", null, { db: t.db, queue: "idle" });
    const ac = new AbortController();
    const waiting = waitForJob(id, { db: t.db, signal: ac.signal });
    await subscribed(id);
    const reason = new Error("stop waiting");
    ac.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    await expect(waitForJob(id, { db: t.db, signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it("tenant: another tenant's job is not found; its own resolves", async () => {
    const id = await enqueue("finish", null, { db: t.db, queue: "tenants", tenant: "acme" });
    await expect(waitForJob(id, { db: t.db, tenant: "globex" })).rejects.toThrow(`job ${id} not found for tenant "globex"`);
    if (backend.name === "postgres") expect((await t.sql<{ awaited: unknown }>("SELECT awaited FROM {jobs} WHERE id = $1", [id]))[0]?.awaited).toBe(false);
    const waiting = waitForJob(id, { db: t.db, tenant: "acme" });
    await subscribed(id);
    await processOne({ finish: () => "mine" }, { db: other, queue: "tenants" });
    expect(await waiting).toMatchObject({ id, status: "done", result: "mine", tenant: "acme" });
  });

  it("bad input is a JobError that says what to fix", async () => {
    await expect(waitForJob(0, { db: t.db })).rejects.toThrow(JobError);
    await expect(waitForJob(1, { db: t.db, timeout: -1 })).rejects.toThrow("timeout must be a number of seconds ≥ 0, got -1");
    await expect(waitForJob(1, { db: t.db, signal: "no" as unknown as AbortSignal })).rejects.toThrow("signal must be an AbortSignal");
    await expect(waitForJob(1, { db: t.db, every: 1 } as never)).rejects.toThrow(JobError);
    await expect(waitForJob(987_654_321, { db: t.db })).rejects.toThrow("job 987654321 not found");
  });

  it.runIf(backend.name === "postgres")("PostgreSQL: only awaited jobs notify; ending jobs nobody awaits sends nothing", async () => {
    // LISTEN straight to the server: through a transaction pooler no notification reaches a client.
    const client = new pg.Client({ connectionString: PG_LISTEN_URL ?? PG_URL });
    await client.connect();
    const heard: string[] = [];
    client.on("notification", (m) => heard.push(m.payload ?? ""));
    try {
      await client.query(`LISTEN "${t.db.channel}.ended"`);
      for (let i = 0; i < 5; i++) await enqueue("finish", null, { db: t.db, queue: "quiet" });
      expect(await drain({ finish: () => null }, { db: other, queue: "quiet" })).toBe(5);
      const id = await enqueue("finish", null, { db: t.db, queue: "quiet" });
      const waiting = waitForJob(id, { db: t.db });
      await subscribed(id);
      await drain({ finish: () => null }, { db: other, queue: "quiet" });
      await waiting;
      await waitFor("the notification", async () => heard.length > 0);
      await sleep(200);
      expect(heard).toEqual([String(id)]);
    } finally {
      await client.end();
    }
  });
});
