import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueueMany, statusCounts } from "../../src/index.js";
import { backends, waitFor, type TestDatabase } from "../helpers/backends.js";

const tsx = createRequire(import.meta.url).resolve("tsx");
const script = fileURLToPath(new URL("./fixtures/sqlite-worker.ts", import.meta.url));
const sqlite = backends().find((b) => b.name === "sqlite");

interface Summary {
  pid: number;
  ran: number;
  errors: string[];
}

function startWorker(path: string): { child: ChildProcess; ready: Promise<void>; summary: Promise<Summary> } {
  const child = spawn(process.execPath, ["--import", tsx, script, path], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  child.stdout!.on("data", (chunk: Buffer) => {
    out += chunk.toString();
    if (out.startsWith("ready\n")) markReady();
  });
  child.stderr!.on("data", (chunk: Buffer) => (err += chunk.toString()));
  const summary = new Promise<Summary>((resolve, reject) => {
    child.on("exit", (code) => {
      const last = out.trim().split("\n").pop() ?? "";
      if (code === 0 && last.startsWith("{")) resolve(JSON.parse(last) as Summary);
      else reject(new Error(`worker ${child.pid} exited with ${code}: ${err || out}`));
    });
  });
  return { child, ready, summary };
}

describe.skipIf(!sqlite)("SQLite: one file, several worker processes", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await sqlite!.create();
    await t.sql("CREATE TABLE ran (job_id INTEGER PRIMARY KEY, pid INTEGER NOT NULL)");
  });
  afterAll(() => t?.close());

  it("4 processes, 2,000 jobs: each runs exactly once, none is left running, and no SQLITE_BUSY surfaces", async () => {
    const path = t.url.slice("sqlite:".length);
    const workers = Array.from({ length: 4 }, () => startWorker(path));
    try {
      await Promise.all(workers.map((w) => w.ready));
      // Enqueue while the workers are already claiming: writers from five processes at once.
      for (let batch = 0; batch < 10; batch++) {
        await enqueueMany(
          Array.from({ length: 200 }, (_, i) => ({ task: "work", payload: { n: batch * 200 + i } })),
          { db: t.db },
        );
      }
      await waitFor(
        "all 2,000 jobs done",
        async () => {
          const [status] = await statusCounts({ db: t.db, queue: "default" });
          return status && status.counts.done + status.counts.failed === 2000;
        },
        120_000,
        100,
      );
    } finally {
      for (const w of workers) w.child.kill("SIGTERM");
    }
    const summaries = await Promise.all(workers.map((w) => w.summary));

    expect(summaries.flatMap((s) => s.errors)).toEqual([]);
    const [status] = await statusCounts({ db: t.db, queue: "default" });
    expect(status).toMatchObject({ counts: { pending: 0, running: 0, failed: 0, done: 2000 }, total: 2000 });
    const [ran] = await t.sql<{ n: number; distinct_jobs: number }>("SELECT count(*) AS n, count(DISTINCT job_id) AS distinct_jobs FROM ran");
    expect(ran).toEqual({ n: 2000, distinct_jobs: 2000 });
    expect(summaries.reduce((sum, s) => sum + s.ran, 0)).toBe(2000);
    const [attempts] = await t.sql<{ max: number }>("SELECT max(attempts) AS max FROM {all}");
    expect(attempts!.max).toBe(1);
    // Every process took part (the claim is shared, not one process draining the queue).
    expect(summaries.filter((s) => s.ran > 0)).toHaveLength(4);
  });
});
