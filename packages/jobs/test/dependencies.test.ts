// Dependencies (issue 19): dependsOn, flows by ref, failure policies, release on every path
// that ends a job, reads (getJob, statusCounts, ctx.dependencies()), pruning. All backends.
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import {
  cancelJob,
  drain,
  enqueue,
  enqueueMany,
  getJob,
  JobError,
  processOne,
  prune,
  reclaim,
  retryJob,
  schedule,
  snooze,
  statusCounts,
  triggerSchedule,
  unschedule,
  type DependencyInfo,
  type JobContext,
} from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

const permanent = (message: string) => Object.assign(new Error(message), { retryable: false });

describe.each(backends())("dependencies ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const status = async (id: number) => (await getJob(id, { db: t.db }))?.status;
  const count = async () => Number((await t.sql<{ n: number | string }>("SELECT count(*) AS n FROM {all}"))[0]?.n);

  it("a job waits for its dependencies, is released by the completion of the last one, and shows both directions", async () => {
    const queue = "basic";
    const a = await enqueue("step", { n: 1 }, { db: t.db, queue });
    const b = await enqueue("step", { n: 2 }, { db: t.db, queue });
    const c = await enqueue("join", null, { db: t.db, queue, dependsOn: [a, b] });
    expect(await getJob(c, { db: t.db })).toMatchObject({ status: "waiting", dependsOn: [a, b], dependents: [] });
    expect(await getJob(a, { db: t.db })).toMatchObject({ status: "pending", dependsOn: [], dependents: [c] });
    const [counts] = await statusCounts({ db: t.db, queue });
    expect(counts?.counts).toMatchObject({ pending: 2, waiting: 1 });
    expect(counts?.ready).toBe(2);

    const seen: DependencyInfo[][] = [];
    const handlers = {
      step: (p: { n: number }) => p.n * 10,
      join: async (_p: unknown, ctx: JobContext) => {
        seen.push(await ctx.dependencies());
        return "joined";
      },
    };
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(await status(c)).toBe("waiting");
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    expect(await status(c)).toBe("pending");
    expect(await drain(handlers, { db: t.db, queue })).toBe(1);
    expect(await status(c)).toBe("done");
    expect(seen).toEqual([
      [
        { id: a, task: "step", status: "done", result: 10 },
        { id: b, task: "step", status: "done", result: 20 },
      ],
    ]);
  });

  it("a flow in one enqueueMany call, by ref: runs in dependency order, atomically", async () => {
    const queue = "flow";
    const ids = await enqueueMany(
      [
        { task: "render", payload: { page: 2 }, ref: "p2", dependsOn: ["p1"] },
        { task: "render", payload: { page: 1 }, ref: "p1" },
        { task: "zip", dependsOn: ["p1", "p2"] },
      ],
      { db: t.db, queue },
    );
    expect(await Promise.all(ids.map(status))).toEqual(["waiting", "pending", "waiting"]);
    const order: string[] = [];
    const handlers = {
      render: (p: { page: number }) => void order.push(`render ${p.page}`),
      zip: async (_p: unknown, ctx: JobContext) => {
        order.push("zip");
        return (await ctx.dependencies()).map((d) => d.id);
      },
    };
    expect(await drain(handlers, { db: t.db, queue })).toBe(3);
    expect(order).toEqual(["render 1", "render 2", "zip"]);
    expect(await getJob(ids[2] as number, { db: t.db })).toMatchObject({ status: "done", result: [ids[0], ids[1]] });
  });

  it("cycles, unknown ids, another tenant's job, unknown refs and keyed flow jobs are refused, nothing written", async () => {
    const before = await count();
    const other = await enqueue("x", null, { db: t.db, queue: "refused", tenant: "org-b" });
    const cases: [() => Promise<unknown>, RegExp][] = [
      [
        () =>
          enqueueMany(
            [
              { task: "a", ref: "a", dependsOn: ["b"] },
              { task: "b", ref: "b", dependsOn: ["a"] },
            ],
            { db: t.db },
          ),
        /cycle among "a", "b"/,
      ],
      [() => enqueueMany([{ task: "a", ref: "a", dependsOn: ["a"] }], { db: t.db }), /cycle/],
      [() => enqueue("a", null, { db: t.db, dependsOn: [987654321] }), /names job 987654321, which does not exist/],
      [() => enqueue("a", null, { db: t.db, tenant: "org-a", dependsOn: [other] }), /does not exist for tenant "org-a"/],
      [() => enqueueMany([{ task: "a", dependsOn: ["nope"] }], { db: t.db }), /names "nope", which no item of this call has as its ref/],
      [() => enqueue("a", null, { db: t.db, dependsOn: [other], idempotencyKey: "k" }), /cannot also have an idempotencyKey/],
      [() => enqueue("a", null, { db: t.db, dependsOn: [1.5] }), /dependsOn\[0\] must be a job id/],
      [() => enqueue("a", null, { db: t.db, onDependencyFailure: "run" }), /applies only to a job with dependsOn/],
      [() => enqueue("a", null, { db: t.db, dependsOn: [other], onDependencyFailure: "ignore" as "run" }), /must be "fail", "cancel", "run" or "hold"/],
    ];
    for (const [call, message] of cases) {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(JobError);
      expect((error as Error).message).toMatch(message);
    }
    expect(await count()).toBe(before + 1);
    // The valid half of a refused call is not written either: a flow whose second item is bad.
    await expect(
      enqueueMany(
        [
          { task: "ok", ref: "ok" },
          { task: "bad", dependsOn: ["ok", 987654321] },
        ],
        { db: t.db },
      ),
    ).rejects.toThrow(JobError);
    expect(await count()).toBe(before + 1);
  });

  it("a dependency by ref must be a job of the same tenant, as by id: another tenant's, or tenant against none, is refused, nothing written", async () => {
    const queue = "ref-tenants";
    const before = await count();
    const cases: [{ tenant?: string }, { tenant?: string }, RegExp][] = [
      [
        { tenant: "org-a" },
        { tenant: "org-b" },
        /^items\[1\]\.dependsOn names a ref \(items\[0\]\.ref\) whose job is of tenant "org-a"; this job is of tenant "org-b" \(a dependency must be a job of the same tenant\)$/,
      ],
      [
        { tenant: "org-a" },
        {},
        /^items\[1\]\.dependsOn names a ref \(items\[0\]\.ref\) whose job is of tenant "org-a"; this job has no tenant \(a dependency must be a job of the same tenant\)$/,
      ],
      [
        {},
        { tenant: "org-b" },
        /^items\[1\]\.dependsOn names a ref \(items\[0\]\.ref\) whose job has no tenant; this job is of tenant "org-b" \(a dependency must be a job of the same tenant\)$/,
      ],
    ];
    for (const [dependency, dependent, message] of cases) {
      const error = await enqueueMany(
        [
          { task: "a", ref: "x", ...dependency },
          { task: "b", dependsOn: ["x"], ...dependent },
        ],
        { db: t.db, queue },
      ).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(JobError);
      expect((error as Error).message).toMatch(message);
      expect((error as JobError).field).toBe("items[1].dependsOn");
    }
    expect(await count()).toBe(before);
    // Same tenant (or none on both sides) by ref stays a flow.
    const [a, b] = await enqueueMany(
      [
        { task: "a", ref: "x", tenant: "org-a" },
        { task: "b", dependsOn: ["x"], tenant: "org-a" },
      ],
      { db: t.db, queue },
    );
    expect(await getJob(b as number, { db: t.db, tenant: "org-a" })).toMatchObject({ status: "waiting", dependsOn: [a] });
  });

  it("ctx.dependencies() reads only its own tenant: two tenants' twin flows, and an edge planted across tenants, never cross", async () => {
    const queue = "tenants";
    const a = await enqueue("step", { n: 1 }, { db: t.db, queue, tenant: "org-a" });
    const b = await enqueue("step", { n: 2 }, { db: t.db, queue, tenant: "org-b" });
    const joinA = await enqueue("join", null, { db: t.db, queue, tenant: "org-a", dependsOn: [a] });
    const joinB = await enqueue("join", null, { db: t.db, queue, tenant: "org-b", dependsOn: [b] });
    const step = { step: (p: { n: number }) => p.n * 10 };
    expect(await processOne(step, { db: t.db, queue })).toBe(true);
    expect(await processOne(step, { db: t.db, queue })).toBe(true);
    // enqueue refuses another tenant's dependency (the test above), so the read's own tenant
    // condition can only be reached by an edge written behind the API's back.
    await t.sql(`INSERT INTO ${t.db.dependenciesTable} (job_id, depends_on_id) VALUES ($1, $2), ($3, $4)`, [joinA, b, joinB, a]);
    const seen = new Map<number, DependencyInfo[]>();
    const join = async (_p: unknown, ctx: JobContext) => void seen.set(ctx.job.id, await ctx.dependencies());
    expect(await drain({ join }, { db: t.db, queue })).toBe(2);
    expect(seen.get(joinA)).toEqual([{ id: a, task: "step", status: "done", result: 10 }]);
    expect(seen.get(joinB)).toEqual([{ id: b, task: "step", status: "done", result: 20 }]);
  });

  it("inside the caller's transaction: rolled back with it, visible on commit", async () => {
    const dep = await enqueue("dep", null, { db: t.db, queue: "tx" });
    const before = await count();
    await t.withTransaction(
      (bound) =>
        enqueueMany(
          [
            { task: "a", ref: "a" },
            { task: "b", dependsOn: ["a", dep] },
          ],
          { db: bound },
        ),
      "rollback",
    );
    expect(await count()).toBe(before);
    const [, b] = await t.withTransaction(
      (bound) =>
        enqueueMany(
          [
            { task: "a", ref: "a" },
            { task: "b", dependsOn: ["a", dep] },
          ],
          { db: bound },
        ),
      "commit",
    );
    expect(await getJob(b as number, { db: t.db })).toMatchObject({ status: "waiting", dependsOn: [dep, (b as number) - 1] });
  });

  it("dependencies that already ended: done → pending at once; failed → the policy at once", async () => {
    const queue = "ended";
    const ok = await enqueue("ok", null, { db: t.db, queue });
    const bad = await enqueue("bad", null, { db: t.db, queue });
    await drain({ ok: () => 1, bad: () => Promise.reject(permanent("boom")) }, { db: t.db, queue });
    expect(await status(await enqueue("next", null, { db: t.db, queue: "ended2", dependsOn: [ok] }))).toBe("pending");
    const failed = await enqueue("next", null, { db: t.db, queue: "ended2", dependsOn: [ok, bad] });
    expect(await getJob(failed, { db: t.db })).toMatchObject({ status: "failed", lastError: expect.stringContaining(`dependency ${bad} failed`) as string });
    expect(await status(await enqueue("next", null, { db: t.db, queue: "ended2", dependsOn: [bad], onDependencyFailure: "cancel" }))).toBe("cancelled");
    expect(await status(await enqueue("next", null, { db: t.db, queue: "ended2", dependsOn: [bad], onDependencyFailure: "run" }))).toBe("pending");
  });

  it("failure policies cascade in the failing transaction: fail names the dependency, cancel cancels, run runs and sees it", async () => {
    const queue = "policies";
    const [root, failing, cancelled, running, grandchild] = await enqueueMany(
      [
        { task: "root", ref: "root" },
        { task: "child", ref: "f", dependsOn: ["root"] },
        { task: "child", dependsOn: ["f"], onDependencyFailure: "cancel" },
        { task: "report", dependsOn: ["root"], onDependencyFailure: "run" },
        { task: "child", ref: "g", dependsOn: ["f"], onDependencyFailure: "run" },
      ],
      { db: t.db, queue },
    );
    const seen: DependencyInfo[][] = [];
    const ran: number[] = [];
    const handlers = {
      root: () => Promise.reject(permanent("root broke")),
      child: (_p: unknown, ctx: JobContext) => void ran.push(ctx.job.id),
      report: async (_p: unknown, ctx: JobContext) => void seen.push(await ctx.dependencies()),
    };
    expect(await processOne(handlers, { db: t.db, queue })).toBe(true);
    // One transaction ended root, failed f, cancelled its cancel-dependent, released the rest.
    expect(await getJob(failing as number, { db: t.db })).toMatchObject({
      status: "failed",
      lastError: `dependency ${root} failed; onDependencyFailure is "fail"`,
    });
    expect(await getJob(cancelled as number, { db: t.db })).toMatchObject({
      status: "cancelled",
      lastError: expect.stringContaining(`dependency ${failing} failed`) as string,
    });
    expect(await status(running as number)).toBe("pending");
    expect(await status(grandchild as number)).toBe("pending");
    await drain(handlers, { db: t.db, queue });
    expect(seen).toEqual([[{ id: root, task: "root", status: "failed", result: null }]]);
    expect(ran).toEqual([grandchild]);
  });

  it("retry and snooze do not end a dependency; cancel does, and so does a reclaim that fails the job", async () => {
    const queue = "paths";
    let calls = 0;
    const flaky = await enqueue("flaky", null, { db: t.db, queue, maxAttempts: 2 });
    const sleepy = await enqueue("sleepy", null, { db: t.db, queue });
    const afterFlaky = await enqueue("after", null, { db: t.db, queue: "paths-after", dependsOn: [flaky] });
    const afterSleepy = await enqueue("after", null, { db: t.db, queue: "paths-after", dependsOn: [sleepy] });
    const handlers = {
      flaky: () => {
        calls++;
        throw new Error("try again");
      },
      sleepy: () => snooze(60),
    };
    await drain(handlers, { db: t.db, queue });
    expect(calls).toBe(1);
    expect(await status(flaky)).toBe("pending");
    expect(await status(sleepy)).toBe("pending");
    expect(await status(afterFlaky)).toBe("waiting");
    expect(await status(afterSleepy)).toBe("waiting");

    // Admin cancel ends it: the dependent fails (its default policy).
    expect(await cancelJob(sleepy, { db: t.db })).toBe(true);
    expect(await getJob(afterSleepy, { db: t.db })).toMatchObject({
      status: "failed",
      lastError: expect.stringContaining(`dependency ${sleepy} was cancelled`) as string,
    });

    // The retry's run fails for good: that ends it, and its dependent fails.
    await t.sql("UPDATE {jobs} SET run_at = updated_at WHERE id = $1", [flaky]);
    await drain(handlers, { db: t.db, queue });
    expect(calls).toBe(2);
    expect(await getJob(afterFlaky, { db: t.db })).toMatchObject({
      status: "failed",
      lastError: expect.stringContaining(`dependency ${flaky} failed`) as string,
    });
  });

  it("unschedule cancels a pending run: a job waiting on it follows its policy in the same transaction", async () => {
    await schedule("nightly-export", "0 3 * * *", { task: "export", queue: "scheduled", db: t.db });
    const run = await triggerSchedule("nightly-export", { db: t.db });
    const after = await enqueue("after", null, { db: t.db, queue: "scheduled-after", dependsOn: [run], onDependencyFailure: "cancel" });
    expect(await unschedule("nightly-export", { db: t.db })).toBe(true);
    expect(await status(run)).toBe("cancelled");
    expect(await getJob(after, { db: t.db })).toMatchObject({
      status: "cancelled",
      lastError: expect.stringContaining(`dependency ${run} was cancelled`) as string,
    });
  });

  it("a reclaim that fails a job on its last attempt releases its dependents by policy", async () => {
    const queue = "reclaimed";
    const lost = await enqueue("lost", null, { db: t.db, queue });
    const after = await enqueue("after", null, { db: t.db, queue: "reclaimed-after", dependsOn: [lost], onDependencyFailure: "run" });
    // A claim whose worker vanished: running, attempt used, no heartbeat.
    await t.sql(
      `UPDATE {jobs} SET status = 'running', attempts = 1, started_at = updated_at, heartbeat_at = updated_at, locked_until = updated_at,
       claim_token = '00000000-0000-4000-8000-000000000001' WHERE id = $1`,
      [lost],
    );
    const reclaimed = await reclaim({ db: t.db, lease: 0, queue });
    expect(reclaimed.map((r) => [r.id, r.status])).toEqual([[lost, "failed"]]);
    expect(await status(after)).toBe("pending");
  });

  it("retryJob of a failed dependency before its dependent gave up is not an end: a dependent already failed stays failed", async () => {
    const queue = "retry";
    const dep = await enqueue("dep", null, { db: t.db, queue });
    const dependent = await enqueue("after", null, { db: t.db, queue, dependsOn: [dep] });
    await processOne({ dep: () => Promise.reject(permanent("no")) }, { db: t.db, queue });
    expect(await status(dependent)).toBe("failed");
    expect(await retryJob(dep, { db: t.db })).toBe(true);
    await processOne({ dep: () => 1 }, { db: t.db, queue });
    expect(await status(dep)).toBe("done");
    expect(await status(dependent)).toBe("failed");
  });

  it("prune keeps a finished job that a waiting job still needs", async () => {
    const queue = "prune";
    const a = await enqueue("a", null, { db: t.db, queue });
    const b = await enqueue("b", null, { db: t.db, queue });
    const waiting = await enqueue("c", null, { db: t.db, queue: "prune-later", dependsOn: [a, b] });
    await processOne({ a: () => "kept" }, { db: t.db, queue });
    // Finished a minute ago by the database clock: old enough for `olderThan: 0` without waiting for the clock to move.
    await t.sql(`UPDATE {history} SET finished_at = ${t.db.sql.nowPlus("60", "-")} WHERE id = $1`, [a]);
    await prune({ olderThan: 0, db: t.db });
    expect(await status(a)).toBe("done");
    await processOne({ b: () => 1 }, { db: t.db, queue });
    await drain({ c: async (_p: unknown, ctx: JobContext) => (await ctx.dependencies()).map((d) => d.result) }, { db: t.db, queue: "prune-later" });
    expect(await getJob(waiting, { db: t.db })).toMatchObject({ status: "done", result: ["kept", 1] });
    await prune({ olderThan: 0, db: t.db });
    expect(await getJob(a, { db: t.db })).toBeNull();
  });
});

describe("ctx.dependencies() types", () => {
  it("types the results as the caller says (R | null), unknown by default", () => {
    expectTypeOf<Awaited<ReturnType<JobContext["dependencies"]>>[number]["result"]>().toEqualTypeOf<unknown>();
    const _typed = (ctx: JobContext) => ctx.dependencies<{ rows: number }>();
    expectTypeOf<Awaited<ReturnType<typeof _typed>>[number]["result"]>().toEqualTypeOf<{ rows: number } | null>();
  });
});
