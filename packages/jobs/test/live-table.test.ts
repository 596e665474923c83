// Issue 33.2: every read finds an ended job where it is — in history since the write that ended
// it moved it there, or still in the live table on a database not yet upgraded — with the
// answer, order and tenant scoping it had when ended jobs stayed in the live table. All backends.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cancelJob,
  drain,
  enqueue,
  enqueueBatch,
  getJob,
  listJobs,
  processOne,
  type BatchSummary,
  type DependencyInfo,
  type JobContext,
} from "../src/index.js";
import { createDashboard } from "../src/dashboard/index.js";
import { latestJobs, recentActivity, relatedJobs } from "../src/dashboard/queries.js";
import { backends, type TestDatabase } from "./helpers/backends.js";
import { cli } from "./helpers/cli.js";

const permanent = (message: string) => Object.assign(new Error(message), { retryable: false });

describe.each(backends())("reads of ended jobs in history ($name)", (backend) => {
  let t: TestDatabase;
  let servers: Server[] = [];
  const queue = "ended";
  const tenant = "org-a";
  /** Ended done (with a result), failed (for good) and cancelled, and one still pending; all of tenant org-a. */
  let done: number, failed: number, cancelled: number, pending: number;
  /** A done job of another tenant. */
  let other: number;

  /** Where a job's row is: [in the live table, in history]. */
  const where = async (id: number) => [
    (await t.sql("SELECT id FROM {jobs} WHERE id = $1", [id])).length,
    (await t.sql("SELECT id FROM {history} WHERE id = $1", [id])).length,
  ];

  const dashboard = async (options: { tenant?: string } = {}) => {
    const handler = createDashboard({ db: t.db, basePath: "/", ...options });
    const server = createServer((req, res) => handler(req, res));
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };

  beforeAll(async () => {
    t = await backend.create();
    done = await enqueue("make", { n: 1 }, { db: t.db, queue, tenant });
    failed = await enqueue("break", null, { db: t.db, queue, tenant });
    cancelled = await enqueue("make", { n: 3 }, { db: t.db, queue, tenant });
    expect(await cancelJob(cancelled, { db: t.db })).toBe(true);
    const handlers = { make: (p: { n: number }) => ({ made: p.n }), break: () => Promise.reject(permanent("kaput")) };
    expect(await drain(handlers, { db: t.db, queue })).toBe(2);
    pending = await enqueue("make", { n: 4 }, { db: t.db, queue, tenant });
    other = await enqueue("make", { n: 5 }, { db: t.db, queue: "elsewhere", tenant: "org-b" });
    expect(await processOne(handlers, { db: t.db, queue: "elsewhere" })).toBe(true);
  });
  afterAll(async () => {
    for (const server of servers) await new Promise((resolve) => server.close(resolve));
    servers = [];
    await t.close();
  });

  it("the ended jobs are in history, not in the live table", async () => {
    for (const id of [done, failed, cancelled, other]) expect(await where(id)).toEqual([0, 1]);
    expect(await where(pending)).toEqual([1, 0]);
  });

  it("getJob finds each with its outcome, and only within its tenant", async () => {
    expect(await getJob(done, { db: t.db })).toMatchObject({ id: done, status: "done", result: { made: 1 }, tenant, attempts: 1 });
    expect(await getJob(failed, { db: t.db })).toMatchObject({ id: failed, status: "failed", lastError: expect.stringContaining("kaput") as unknown });
    expect(await getJob(cancelled, { db: t.db, tenant })).toMatchObject({ id: cancelled, status: "cancelled", attempts: 0 });
    expect(await getJob(done, { db: t.db, tenant: "org-b" })).toBeNull();
    expect(await getJob(other, { db: t.db, tenant })).toBeNull();
    expect(await getJob(other, { db: t.db, tenant: "org-b" })).toMatchObject({ status: "done", result: { made: 5 } });
  });

  it("listJobs merges both tables newest first, pages across them, filters by status, task and tenant", async () => {
    const ids = async (options: Parameters<typeof listJobs>[0]) => (await listJobs({ db: t.db, ...options })).jobs.map((j) => j.id);
    expect(await ids({ queue })).toEqual([pending, cancelled, failed, done]);
    const first = await listJobs({ db: t.db, queue, limit: 3 });
    expect(first.jobs.map((j) => j.id)).toEqual([pending, cancelled, failed]);
    expect(await listJobs({ db: t.db, queue, limit: 3, before: first.next! })).toEqual({
      jobs: [expect.objectContaining({ id: done, status: "done" })],
      next: null,
    });
    expect(await ids({ queue, status: "done" })).toEqual([done]);
    expect(await ids({ queue, status: "failed" })).toEqual([failed]);
    expect(await ids({ status: "cancelled" })).toEqual([cancelled]);
    expect(await ids({ queue, status: "pending" })).toEqual([pending]);
    expect(await ids({ queue, task: "break" })).toEqual([failed]);
    expect(await ids({ tenant })).toEqual([pending, cancelled, failed, done]);
    expect(await ids({ tenant: "org-b" })).toEqual([other]);
    expect(await ids({ tenant: "org-c" })).toEqual([]);
    expect((await listJobs({ db: t.db, queue, status: "failed" })).jobs[0]).toMatchObject({
      lastError: expect.stringContaining("kaput") as unknown,
      attempts: 1,
    });
  });

  it("an ended row still in the live table (a database not yet upgraded) is listed with the moved ones, by id", async () => {
    const q = "legacy";
    const older = await enqueue("make", { n: 6 }, { db: t.db, queue: q, tenant });
    const legacy = await enqueue("make", { n: 7 }, { db: t.db, queue: q, tenant });
    const newer = await enqueue("make", { n: 8 }, { db: t.db, queue: q, tenant });
    await t.sql(`UPDATE {jobs} SET status = 'done', finished_at = ${t.db.sql.now}, started_at = run_at WHERE id = $1`, [legacy]);
    expect(await drain({ make: () => 1 }, { db: t.db, queue: q })).toBe(2);
    expect(await where(legacy)).toEqual([1, 0]);
    expect(await where(older)).toEqual([0, 1]);
    expect((await listJobs({ db: t.db, queue: q, status: "done" })).jobs.map((j) => j.id)).toEqual([newer, legacy, older]);
    expect((await listJobs({ db: t.db, queue: q, status: "done", limit: 1, before: newer })).jobs.map((j) => j.id)).toEqual([legacy]);
    expect(await getJob(legacy, { db: t.db, tenant })).toMatchObject({ status: "done" });
    expect((await latestJobs(t.db, "done", 3)).map((j) => j.id)).toEqual([newer, legacy, older]);
  });

  it("the dashboard lists ended jobs, shows an ended job's page, and keeps a tenant's dashboard to its own", async () => {
    expect((await latestJobs(t.db, "failed", 20)).map((j) => j.id)).toContain(failed);
    expect((await latestJobs(t.db, "cancelled", 20, tenant)).map((j) => j.id)).toEqual([cancelled]);
    expect(await latestJobs(t.db, "done", 20, "org-c")).toEqual([]);
    const home = await (await fetch(`${await dashboard()}/`)).text();
    expect(home).toContain(`data-job="${failed}"`);
    const origin = await dashboard({ tenant });
    const page = await fetch(`${origin}/jobs/${done}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<dd data-field="status">done</dd>');
    expect((await fetch(`${origin}/jobs/${other}`)).status).toBe(404);
    const list = await (await fetch(`${origin}/jobs?status=failed`)).text();
    expect(list).toContain(`data-job="${failed}" data-status="failed"`);
  });

  it("the dashboard's chart samples the waits of jobs that ended", async () => {
    const activity = await recentActivity(t.db);
    expect(activity.waits.get("elsewhere")?.sample).toBe(1);
    expect(activity.waits.get(queue)?.sample).toBe(2);
  });

  it("dependencies and dependents: getJob's lists, ctx.dependencies(), a job's page and the waiting panel read ended dependencies", async () => {
    const q = "flow";
    const first = await enqueue("make", { n: 10 }, { db: t.db, queue: q, tenant });
    const second = await enqueue("break", null, { db: t.db, queue: q, tenant });
    const after = await enqueue("after", null, { db: t.db, queue: q, tenant, dependsOn: [first, second], onDependencyFailure: "run" });
    const seen: DependencyInfo[][] = [];
    const handlers = {
      make: (p: { n: number }) => ({ made: p.n }),
      break: () => Promise.reject(permanent("no")),
      after: async (_p: unknown, ctx: JobContext) => void seen.push(await ctx.dependencies()),
    };
    expect(await processOne(handlers, { db: t.db, queue: q })).toBe(true);
    expect(await where(first)).toEqual([0, 1]);
    expect(await getJob(first, { db: t.db })).toMatchObject({ status: "done", dependents: [after] });
    const panel = await (await fetch(`${await dashboard()}/`)).text();
    expect(panel).toContain(`data-dependency="${first}" data-status="done"`);
    expect(await relatedJobs(t.db, [first, second, after], tenant)).toEqual(
      new Map([
        [first, { task: "make", status: "done" }],
        [second, { task: "break", status: "pending" }],
        [after, { task: "after", status: "waiting" }],
      ]),
    );
    expect(await relatedJobs(t.db, [first], "org-b")).toEqual(new Map());
    expect(await drain(handlers, { db: t.db, queue: q })).toBe(2);
    expect(seen).toEqual([
      [
        { id: first, task: "make", status: "done", result: { made: 10 } },
        { id: second, task: "break", status: "failed", result: null },
      ],
    ]);
    expect(await getJob(after, { db: t.db })).toMatchObject({ status: "done", dependsOn: [first, second] });
    const page = await (await fetch(`${await dashboard()}/jobs/${after}`)).text();
    expect(page).toContain(`data-job="${first}" data-status="done"`);
    expect(page).toContain(`data-job="${second}" data-status="failed"`);
  });

  it("a batch counts its ended items wherever they are: ctx.batch() and the waiting panel", async () => {
    const q = "batch";
    const { batchId, ids, callbackId } = await enqueueBatch(
      [
        { task: "item", payload: { ok: true } },
        { task: "item", payload: { ok: false } },
        { task: "item", payload: { ok: true } },
        { task: "item", payload: { ok: true } },
      ],
      { db: t.db, queue: q, tenant, onComplete: { task: "sum" } },
    );
    const seen: (BatchSummary | null)[] = [];
    const handlers = {
      item: (p: { ok: boolean }) => (p.ok ? 1 : Promise.reject(permanent("bad item"))),
      sum: async (_p: unknown, ctx: JobContext) => void seen.push(await ctx.batch()),
    };
    expect(await cancelJob(ids[3] as number, { db: t.db })).toBe(true);
    expect(await processOne(handlers, { db: t.db, queue: q })).toBe(true);
    expect(await processOne(handlers, { db: t.db, queue: q })).toBe(true);
    const panel = await (await fetch(`${await dashboard()}/`)).text();
    const row = new RegExp(`<tr data-batch="${batchId}">([\\s\\S]*?)</tr>`).exec(panel)?.[1] ?? "";
    expect(row).toContain('<td data-count="done">1</td>');
    expect(row).toContain('<td data-count="failed">1</td>');
    expect(row).toContain('<td data-count="cancelled">1</td>');
    expect(row).toContain('<td data-count="pending">1</td>');
    expect(row).toContain(`#${callbackId} sum (waiting)`);
    expect(await drain(handlers, { db: t.db, queue: q })).toBe(2);
    expect(seen).toEqual([{ batchId, done: 2, failed: 1, cancelled: 1, failedIds: [ids[1]] }]);
    for (const id of [...ids, callbackId as number]) expect(await where(id)).toEqual([0, 1]);
  });

  it("the CLI's list and show find ended jobs, within a tenant", async () => {
    const common = ["--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])];
    const listed = await cli(["list", "--queue", queue, "--status", "failed", "--json", ...common]);
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { jobs: { id: number; status: string }[] }).jobs).toEqual([expect.objectContaining({ id: failed, status: "failed" })]);
    const table = await cli(["list", "--queue", queue, ...common]);
    expect(
      table.stdout
        .split("\n")
        .filter((line) => /^\d/.test(line))
        .map((line) => Number(line.split(/\s+/)[0])),
    ).toEqual([pending, cancelled, failed, done]);
    const shown = await cli(["show", String(done), ...common]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: done, status: "done", result: { made: 1 } });
    expect((await cli(["show", String(done), "--tenant", "org-b", ...common])).code).toBe(1);
  }, 30_000);
});
