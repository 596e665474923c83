// ctx.reportProgress (issue 36.7): live progress kept apart from the job's row and from the
// resume cursor, throttled, fenced by the claim token, readable through getJob's liveProgress
// and the dashboard's /jobs/:id/events stream, scoped by tenant like the job's page.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, processOne, prune, pruneHistory, reclaim, runWorker, type JobContext, type JobsDatabase } from "../src/index.js";
import { ensureDays } from "../src/maintenance/partitions.js";
import { createDashboard } from "../src/dashboard/index.js";
import { PROGRESS_WRITE_INTERVAL_MS } from "../src/run/report-progress.js";
import { backends, deferred, waitFor, type TestDatabase } from "./helpers/backends.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(backends())("ctx.reportProgress ($name)", (backend) => {
  let t: TestDatabase;

  beforeAll(async () => {
    t = await backend.create();
  });
  afterAll(() => t?.close());

  const stored = async (id: number) => (await getJob(id, { db: t.db }))?.liveProgress;
  const rows = async (id: number) => (await t.sql<{ n: unknown }>(`SELECT count(*) AS n FROM ${t.tableName("jobs_progress")} WHERE job_id = $1`, [id]))[0]!.n;

  it("the first report is written at once, later ones at most once per interval, the latest always; the cursor stays apart", async () => {
    const id = await enqueue("count", null, { db: t.db, queue: "live" });
    const release = deferred();
    const seen: unknown[] = [];
    const run = processOne(
      {
        count: async (_p: unknown, ctx: JobContext) => {
          expect(await ctx.reportProgress({ n: 1 })).toBe(true);
          seen.push(await stored(id));
          const startedAt = Date.now();
          for (let n = 2; n <= 100; n++) void ctx.reportProgress({ n });
          // Within the interval nothing more was written: the first value is what readers see.
          if (Date.now() - startedAt < PROGRESS_WRITE_INTERVAL_MS / 2) seen.push(await stored(id));
          await ctx.checkpoint({ cursor: 7 });
          await release.promise;
          return "ok";
        },
      },
      { db: t.db, queue: "live" },
    );
    await waitFor("the latest value, written when the interval ended", async () => JSON.stringify(await stored(id)) === '{"n":100}');
    expect(seen[0]).toEqual({ n: 1 });
    if (seen.length > 1) expect(seen[1]).toEqual({ n: 1 });
    const running = await getJob(id, { db: t.db });
    expect(running).toMatchObject({ status: "running", progress: { cursor: 7 }, liveProgress: { n: 100 } });
    release.resolve();
    expect(await run).toBe(true);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", liveProgress: { n: 100 }, progress: { cursor: 7 } });
  });

  it("the value kept by the throttle is written before the run's outcome", async () => {
    const id = await enqueue("quick", null, { db: t.db, queue: "flush" });
    await processOne(
      {
        quick: async (_p: unknown, ctx: JobContext) => {
          await ctx.reportProgress("reading");
          void ctx.reportProgress({ done: 3, of: 3 });
        },
      },
      { db: t.db, queue: "flush" },
    );
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "done", liveProgress: { done: 3, of: 3 } });
  });

  it("a worker's progressInterval sets the pace: a long one holds the second report back until the run's end", async () => {
    const queue = "paced";
    const id = await enqueue("paced", null, { db: t.db, queue });
    const release = deferred();
    const heldAfter: unknown[] = [];
    const stop = new AbortController();
    const worker = runWorker(
      {
        paced: async (_p: unknown, ctx: JobContext) => {
          await ctx.reportProgress({ n: 1 });
          void ctx.reportProgress({ n: 2 });
          // Past the default interval: with a 30 s one, nothing more was written yet.
          await sleep(PROGRESS_WRITE_INTERVAL_MS + 300);
          heldAfter.push(await stored(id));
          await release.promise;
        },
      },
      { db: t.db, queue, progressInterval: 30, pollInterval: 0.05, sweepInterval: 0, schedules: false, signal: stop.signal },
    );
    await waitFor("the run's check", async () => heldAfter.length === 1);
    expect(heldAfter[0]).toEqual({ n: 1 });
    release.resolve();
    await waitFor("the job done", async () => (await getJob(id, { db: t.db }))?.status === "done");
    expect(await stored(id)).toEqual({ n: 2 });
    stop.abort();
    await worker;
  });

  it("progressInterval below 0.01 s is refused, at the worker and at the dashboard", async () => {
    await expect(runWorker({}, { db: t.db, queue: "never", progressInterval: 0.001 })).rejects.toThrow(
      "progressInterval must be a number of seconds ≥ 0.01, got 0.001",
    );
    expect(() => createDashboard({ db: t.db, basePath: "/ops", progressInterval: 0 })).toThrow(
      "createDashboard: progressInterval must be a number of seconds >= 0.01, got 0",
    );
  });

  it("a job that never reported reads liveProgress null and has no progress row; a bad value is a JobError", async () => {
    const id = await enqueue("silent", null, { db: t.db, queue: "silent" });
    let error: unknown;
    await processOne(
      {
        silent: async (_p: unknown, ctx: JobContext) => {
          error = await ctx.reportProgress(undefined).catch((e: unknown) => e);
          await ctx.reportProgress(() => 1).catch(() => undefined);
        },
      },
      { db: t.db, queue: "silent" },
    );
    expect((error as Error).message).toBe("reportProgress: progress must be a JSON value, got undefined");
    expect((await getJob(id, { db: t.db }))?.liveProgress).toBeNull();
    expect(Number(await rows(id))).toBe(0);
  });

  it("fenced: once the job was taken over, a report resolves false and writes nothing", async () => {
    const id = await enqueue("taken", null, { db: t.db, queue: "fenced", maxAttempts: 3 });
    const takenOver = deferred();
    let late: boolean | undefined;
    const run = processOne(
      {
        taken: async (_p: unknown, ctx: JobContext) => {
          await ctx.reportProgress({ step: "mine" });
          await takenOver.promise;
          await sleep(PROGRESS_WRITE_INTERVAL_MS + 50);
          late = await ctx.reportProgress({ step: "stale" });
        },
      },
      { db: t.db, queue: "fenced" },
    );
    await waitFor("the first report", async () => (await stored(id)) !== null);
    expect(await reclaim({ lease: 0, queue: "fenced", db: t.db })).toHaveLength(1);
    takenOver.resolve();
    await run;
    expect(late).toBe(false);
    expect(await stored(id)).toEqual({ step: "mine" });
  });

  it("goes with the job: pruning its history row removes its progress row", async () => {
    const id = await enqueue("pruned", null, { db: t.db, queue: "prune" });
    await processOne({ pruned: (_p: unknown, ctx: JobContext) => ctx.reportProgress(1) }, { db: t.db, queue: "prune" });
    expect(Number(await rows(id))).toBe(1);
    await prune({ olderThan: 0, db: t.db });
    expect(await getJob(id, { db: t.db })).toBeNull();
    expect(Number(await rows(id))).toBe(0);
  });

  it.runIf(backend.name === "postgres")("pruneHistory: a dropped day takes its jobs' progress rows with it (a DROP fires no trigger)", async () => {
    const id = await enqueue("old", null, { db: t.db, queue: "old-day" });
    await processOne({ old: (_p: unknown, ctx: JobContext) => ctx.reportProgress(1) }, { db: t.db, queue: "old-day" });
    await ensureDays(t.db, -10, -10);
    await t.sql(`UPDATE {history} SET finished_at = now() - interval '10 days' WHERE id = $1`, [id]);
    // Moving the row between days may have fired history's triggers: its progress row is put back.
    await t.sql(`INSERT INTO ${t.tableName("jobs_progress")} (job_id, value) VALUES ($1, '1') ON CONFLICT DO NOTHING`, [id]);
    expect(Number(await rows(id))).toBe(1);
    expect(await pruneHistory({ db: t.db, olderThan: 5 * 86400 })).not.toEqual([]);
    expect(await getJob(id, { db: t.db })).toBeNull();
    expect(Number(await rows(id))).toBe(0);
  });

  describe("the dashboard's /jobs/:id/events", () => {
    let server: Server;
    let origin: string;
    let tenantServer: Server;
    let tenantOrigin: string;
    const start = async (db: JobsDatabase, tenant?: string) => {
      const dashboard = createDashboard({ db, basePath: "/ops", ...(tenant ? { tenant } : {}) });
      const s = createServer((req, res) => dashboard(req, res));
      await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
      return { s, origin: `http://127.0.0.1:${(s.address() as AddressInfo).port}` };
    };
    beforeAll(async () => {
      ({ s: server, origin } = await start(t.db));
      ({ s: tenantServer, origin: tenantOrigin } = await start(t.db, "acme"));
    });
    afterAll(async () => {
      server.closeAllConnections();
      tenantServer.closeAllConnections();
      await Promise.all([server, tenantServer].map((s) => new Promise((resolve) => s.close(resolve))));
    });

    /** The stream's events until it ends, as { event, data }. */
    async function events(url: string, onEvent: (event: string, data: { status: string; liveProgress: unknown }) => void): Promise<Response> {
      const response = await fetch(url);
      if (response.status !== 200) return response;
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data) onEvent(event, JSON.parse(data));
        }
      }
      return response;
    }

    it("streams status and live progress as the handler reports, then one end event, and closes", async () => {
      const id = await enqueue("stream", null, { db: t.db, queue: "sse", tenant: "acme" });
      const seen: { event: string; status: string; liveProgress: unknown }[] = [];
      const step = deferred();
      let next = deferred();
      const stream = events(`${origin}/ops/jobs/${id}/events`, (event, data) => {
        seen.push({ event, status: data.status, liveProgress: data.liveProgress });
        next.resolve();
      });
      await next.promise;
      const run = processOne(
        {
          stream: async (_p: unknown, ctx: JobContext) => {
            for (const n of [1, 2, 3]) {
              next = deferred();
              await ctx.reportProgress({ n });
              await next.promise;
            }
            await step.promise;
            return { rows: 3 };
          },
        },
        { db: t.db, queue: "sse" },
      );
      await waitFor("three progress events", async () => seen.filter((e) => e.liveProgress !== null).length >= 3);
      step.resolve();
      await run;
      const response = await stream;
      expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
      expect(seen[0]).toEqual({ event: "job", status: "pending", liveProgress: null });
      expect(seen.filter((e) => e.event === "job" && e.status === "running").map((e) => e.liveProgress)).toEqual(
        expect.arrayContaining([{ n: 1 }, { n: 2 }, { n: 3 }]),
      );
      expect(seen.at(-1)).toEqual({ event: "end", status: "done", liveProgress: { n: 3 } });
      expect(seen.filter((e) => e.event === "end")).toHaveLength(1);
    });

    it("reads at the dashboard's progressInterval: with a long one, a job that ended meanwhile is not streamed before the next read", async () => {
      const paced = createDashboard({ db: t.db, basePath: "/ops", progressInterval: 30 });
      const s = createServer((req, res) => paced(req, res));
      await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
      try {
        const id = await enqueue("stream", null, { db: t.db, queue: "sse-paced" });
        const seen: string[] = [];
        const first = deferred();
        void events(`http://127.0.0.1:${(s.address() as AddressInfo).port}/ops/jobs/${id}/events`, (event, data) => {
          seen.push(`${event}:${data.status}`);
          first.resolve();
        }).catch(() => undefined);
        await first.promise;
        await processOne({ stream: (_p: unknown, ctx: JobContext) => ctx.reportProgress({ n: 1 }) }, { db: t.db, queue: "sse-paced" });
        // Past the default interval: the default would have read the job and streamed its end.
        await sleep(PROGRESS_WRITE_INTERVAL_MS * 2 + 200);
        expect(seen).toEqual(["job:pending"]);
      } finally {
        s.closeAllConnections();
        await new Promise((resolve) => s.close(resolve));
      }
    });

    it("is scoped like the job's page: another tenant's job and a missing one are 404, nothing streamed", async () => {
      const mine = await enqueue("stream", null, { db: t.db, queue: "sse-scope", tenant: "acme" });
      const theirs = await enqueue("stream", null, { db: t.db, queue: "sse-scope", tenant: "globex" });
      expect((await fetch(`${tenantOrigin}/ops/jobs/${theirs}/events`)).status).toBe(404);
      expect((await fetch(`${origin}/ops/jobs/987654321/events`)).status).toBe(404);
      const head = await fetch(`${tenantOrigin}/ops/jobs/${mine}/events`, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect((await fetch(`${tenantOrigin}/ops/jobs/${mine}/events`, { method: "POST" })).status).toBe(405);
    });
  });
});
