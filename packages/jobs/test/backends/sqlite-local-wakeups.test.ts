// SQLite has no LISTEN: workers poll. Within one process the enqueue tells the workers on the
// same file at once — through another connection to that file too — so an embedded app does
// not wait a poll interval for each job. Workers of other processes still poll (BACKENDS.md).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, createWorker, enqueue, enqueueMany, migrate, type JobsDatabase } from "../../src/index.js";
import { deferred } from "../helpers/backends.js";

describe("SQLite wake-ups inside one process", () => {
  let dir: string;
  let app: JobsDatabase;
  let workerDb: JobsDatabase;
  let other: JobsDatabase;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "forge-wake-"));
    app = connect(`sqlite:${join(dir, "jobs.db")}`);
    await migrate({ db: app });
    // The same file by another path spelling: the wake-up follows the file, not the string.
    workerDb = connect(`sqlite:${join(dir, ".", "jobs.db")}`);
    other = connect(`sqlite:${join(dir, "other.db")}`);
    await migrate({ db: other });
  });
  afterAll(async () => {
    await Promise.all([app?.close(), workerDb?.close(), other?.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  async function idleWorker(db: JobsDatabase, seen: (task: string) => void) {
    const ac = new AbortController();
    const worker = createWorker({ ping: (_p, ctx) => seen(ctx.job.task), later: (_p, ctx) => seen(ctx.job.task) }, { db, queue: "wake", pollInterval: 60, signal: ac.signal });
    const idle = deferred();
    worker.on("worker:idle", () => idle.resolve());
    const running = worker.run();
    await idle.promise;
    return { stop: async () => (ac.abort(), await running) };
  }

  it("a worker with a minute-long poll, on its own connection to the file, runs enqueue() and enqueueMany() jobs at once", async () => {
    let started = deferred<string>();
    const worker = await idleWorker(workerDb, (task) => started.resolve(task));
    try {
      for (const send of [() => enqueue("ping", null, { db: app, queue: "wake" }), () => enqueueMany([{ task: "ping" }], { db: app, queue: "wake" })]) {
        started = deferred<string>();
        const sentAt = Date.now();
        await send();
        await started.promise;
        expect(Date.now() - sentAt).toBeLessThan(5_000); // far below the 60 s poll
      }
    } finally {
      await worker.stop();
    }
  });

  it("wakes nobody for a delayed job or another file's queue", async () => {
    const seen: string[] = [];
    const worker = await idleWorker(workerDb, (task) => seen.push(task));
    try {
      await enqueue("later", null, { db: app, queue: "wake", availableIn: 3600 });
      await enqueue("ping", null, { db: other, queue: "wake" });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(seen).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});
