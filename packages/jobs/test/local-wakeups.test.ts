// SQLite and MariaDB have no LISTEN: workers poll. Within one process the enqueue tells the
// workers on the same database at once — through another connection or pool to it too — so
// an app running its worker in-process does not wait a poll interval for each job. Workers of
// other processes still poll (BACKENDS.md). PostgreSQL has LISTEN/NOTIFY: not run there.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, createWorker, enqueue, enqueueMany, type JobsDatabase } from "../src/index.js";
import { backends, deferred, type TestDatabase } from "./helpers/backends.js";

describe.each(backends().filter((b) => b.name !== "postgres"))("wake-ups inside one process ($name)", (backend) => {
  let t: TestDatabase;
  let elsewhere: TestDatabase;
  let workerDb: JobsDatabase;

  beforeAll(async () => {
    t = await backend.create();
    elsewhere = await backend.create();
    // The worker's own connection (pool) to the same database.
    workerDb = connect(t.url, t.schema ? { schema: t.schema } : {});
  });
  afterAll(async () => {
    await workerDb?.close();
    await Promise.all([t?.close(), elsewhere?.close()]);
  });

  async function idleWorker(seen: (task: string) => void) {
    const ac = new AbortController();
    const handler = (_p: unknown, ctx: { job: { task: string } }) => seen(ctx.job.task);
    const worker = createWorker({ ping: handler, later: handler }, { db: workerDb, queue: "wake", pollInterval: 60, signal: ac.signal });
    const idle = deferred();
    worker.on("worker:idle", () => idle.resolve());
    const running = worker.run();
    await idle.promise;
    return {
      stop: async () => {
        ac.abort();
        await running;
      },
    };
  }

  it("a worker with a minute-long poll, on its own connection, runs enqueue() and enqueueMany() jobs at once", async () => {
    let started = deferred<string>();
    const worker = await idleWorker((task) => started.resolve(task));
    try {
      for (const send of [() => enqueue("ping", null, { db: t.db, queue: "wake" }), () => enqueueMany([{ task: "ping" }], { db: t.db, queue: "wake" })]) {
        started = deferred<string>();
        const sentAt = Date.now();
        await send();
        expect(await started.promise).toBe("ping");
        expect(Date.now() - sentAt).toBeLessThan(5_000); // far below the 60 s poll
      }
    } finally {
      await worker.stop();
    }
  });

  it("wakes nobody for a delayed job or for another database's queue", async () => {
    const seen: string[] = [];
    const worker = await idleWorker((task) => seen.push(task));
    try {
      await enqueue("later", null, { db: t.db, queue: "wake", availableIn: 3600 });
      await enqueue("ping", null, { db: elsewhere.db, queue: "wake" });
      // A bounded observation window, time-based on purpose: it proves an absence (no run), and
      // there is no signal for a run that does not happen.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(seen).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});
