import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cancelJob, enqueue, getJob, getJobSteps, processOne, type JobContext } from "../src/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";
import { cli } from "./helpers/cli.js";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createDashboard } from "../src/dashboard/index.js";

describe.each(backends())("a job's steps, read (getJobSteps, forge-jobs show) ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => (t = await backend.create()));
  afterAll(() => t.close());

  const handlers = {
    plan: async (_p: unknown, ctx: JobContext) => {
      await ctx.step("fetch", () => ({ rows: ["é", "b"] }));
      await ctx.step("quiet", () => undefined);
      await ctx.sleep("nap", 3600);
      return "woke";
    },
  };

  it("lists the saved steps in order with their attempt, duration and result size, and the sleep the job waits out", async () => {
    const id = await enqueue("plan", null, { db: t.db, queue: "reads", tenant: "acme" });
    expect(await getJobSteps(id, { db: t.db })).toEqual({ steps: [], waitingFor: null });
    await processOne(handlers, { db: t.db, queue: "reads" });
    const read = await getJobSteps(id, { db: t.db });
    const job = await getJob(id, { db: t.db });
    expect(read!.steps.map(({ name, kind, status, attempt, resultBytes }) => ({ name, kind, status, attempt, resultBytes }))).toEqual([
      { name: "fetch", kind: "step", status: "done", attempt: 1, resultBytes: Buffer.byteLength('{"rows":["é","b"]}') },
      { name: "quiet", kind: "step", status: "done", attempt: 1, resultBytes: 0 },
      { name: "nap", kind: "sleep", status: "sleeping", attempt: 1, resultBytes: 0 },
    ]);
    for (const step of read!.steps.slice(0, 2)) {
      expect(step.durationMs).toBeGreaterThanOrEqual(0);
      expect(step.wakeAt).toBeNull();
    }
    expect(read!.steps[2]!.durationMs).toBeNull();
    expect(read!.steps[2]!.wakeAt!.getTime()).toBe(job!.runAt.getTime());
    expect(read!.waitingFor).toEqual({ kind: "sleep", step: "nap", until: job!.runAt });
    // getJob carries the same list and wait (issue 35.4): one read for a job's page.
    expect(job!.steps).toEqual(read!.steps);
    expect(job!.waitingFor).toEqual(read!.waitingFor);
    expect((await getJob(await enqueue("plan", null, { db: t.db, queue: "no-steps" }), { db: t.db }))!.steps).toEqual([]);
    // Tenant-scoped as getJob: another tenant's job is not found.
    expect(await getJobSteps(id, { db: t.db, tenant: "acme" })).not.toBeNull();
    expect(await getJobSteps(id, { db: t.db, tenant: "other" })).toBeNull();
    expect(await getJobSteps(id + 1_000_000, { db: t.db })).toBeNull();

    const shown = await cli(["show", String(id), "--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])]);
    expect(shown.code, shown.stderr).toBe(0);
    const printed = JSON.parse(shown.stdout) as { steps: { name: string; status: string }[]; waitingFor: { step: string; until: string } };
    expect(printed.steps.map((s) => `${s.name}:${s.status}`)).toEqual(["fetch:done", "quiet:done", "nap:sleeping"]);
    expect(printed.waitingFor).toEqual({ kind: "sleep", step: "nap", until: job!.runAt.toISOString() });
  });

  it("cancels a sleeping job: it ends cancelled, waits for nothing more, and its steps stay readable", async () => {
    const id = await enqueue("plan", null, { db: t.db, queue: "cancel-sleeper" });
    await processOne(handlers, { db: t.db, queue: "cancel-sleeper" });
    expect((await getJobSteps(id, { db: t.db }))!.waitingFor).not.toBeNull();
    expect(await cancelJob(id, { db: t.db })).toBe(true);
    expect(await getJob(id, { db: t.db })).toMatchObject({ status: "cancelled" });
    const read = await getJobSteps(id, { db: t.db });
    expect(read!.waitingFor).toBeNull();
    expect(read!.steps.map((s) => `${s.name}:${s.status}`)).toEqual(["fetch:done", "quiet:done", "nap:done"]);
    expect((await getJob(id, { db: t.db }))!.steps.map((s) => `${s.name}:${s.status}`)).toEqual(["fetch:done", "quiet:done", "nap:done"]);
  });
  it("the dashboard's job page shows the steps and the sleep the job waits out; a job without steps has no such section", async () => {
    const id = await enqueue("plan", null, { db: t.db, queue: "page", tenant: "acme" });
    const plain = await enqueue("plain", null, { db: t.db, queue: "page" });
    await processOne(handlers, { db: t.db, queue: "page" });
    await processOne({ plain: () => "ok" }, { db: t.db, queue: "page" });
    const dashboard = createDashboard({ db: t.db, basePath: "/ops" });
    const server = createServer((req, res) => dashboard(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const page = await (await fetch(`${origin}/ops/jobs/${id}`)).text();
      const section = /<section id="steps">.*?<\/section>/s.exec(page)![0];
      expect([...section.matchAll(/data-step="([^"]+)" data-status="([^"]+)"/g)].map((m) => `${m[1]}:${m[2]}`)).toEqual([
        "fetch:done",
        "quiet:done",
        "nap:sleeping",
      ]);
      expect(section).toContain('data-waiting-for="nap"');
      expect(section).toContain(`${Buffer.byteLength('{"rows":["é","b"]}')} B`);
      expect(await (await fetch(`${origin}/ops/jobs/${plain}`)).text()).not.toContain('id="steps"');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
