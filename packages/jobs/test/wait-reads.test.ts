import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, getJobSteps, processOne, sendEvent, type JobContext } from "../src/index.js";
import { createDashboard } from "../src/dashboard/index.js";
import { backends, type TestDatabase } from "./helpers/backends.js";

describe.each(backends())("what a waiting job waits for: getJobSteps and the dashboard ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await backend.create();
  });
  afterAll(() => t.close());

  const handlers = {
    pay: async (payload: { order: string }, ctx: JobContext) => ctx.waitForEvent("paid", { event: "payment", key: payload.order, timeout: 600 }),
    forever: async (_p: unknown, ctx: JobContext) => ctx.waitForEvent("approval", { event: "approved", key: "doc-1" }),
    parent: async (_p: unknown, ctx: JobContext) => ctx.invoke("sub", "child", null, { queue: "children" }),
  };

  it("an event wait: its step, event, key and timeout; none once the event came", async () => {
    const id = await enqueue("pay", { order: "o-1" }, { db: t.db, queue: "reads", tenant: "acme" });
    await processOne(handlers, { db: t.db, queue: "reads" });
    const now = await t.now();
    const read = await getJobSteps(id, { db: t.db });
    expect(read!.waitingFor).toMatchObject({ kind: "event", step: "paid", event: "payment", key: "o-1" });
    const until = (read!.waitingFor as { until: Date }).until;
    expect(Math.abs(until.getTime() - (now.getTime() + 600_000))).toBeLessThan(5_000);
    // Another tenant reads nothing.
    expect(await getJobSteps(id, { db: t.db, tenant: "other" })).toBeNull();
    const forever = await enqueue("forever", null, { db: t.db, queue: "reads" });
    await processOne(handlers, { db: t.db, queue: "reads" });
    expect((await getJobSteps(forever, { db: t.db }))!.waitingFor).toEqual({ kind: "event", step: "approval", event: "approved", key: "doc-1", until: null });
    await sendEvent("payment", { ok: true }, { key: "o-1", tenant: "acme", db: t.db });
    const after = await getJobSteps(id, { db: t.db });
    expect(after!.waitingFor).toBeNull();
    expect(after!.steps.map((s) => `${s.name}:${s.kind}:${s.status}`)).toEqual(["paid:event:done"]);
  });

  it("getJob says what the job waits for, as getJobSteps does: a sleep, an event, nothing once it came", async () => {
    const napper = await enqueue("nap", null, { db: t.db, queue: "getjob" });
    const payer = await enqueue("pay", { order: "o-2" }, { db: t.db, queue: "getjob", tenant: "acme" });
    const nap = { nap: async (_p: unknown, ctx: JobContext) => ctx.sleep("siesta", 600), pay: handlers.pay };
    await processOne(nap, { db: t.db, queue: "getjob" });
    await processOne(nap, { db: t.db, queue: "getjob" });
    expect((await getJob(napper, { db: t.db }))!.waitingFor).toMatchObject({ kind: "sleep", step: "siesta" });
    expect((await getJob(payer, { db: t.db }))!.waitingFor).toEqual((await getJobSteps(payer, { db: t.db }))!.waitingFor);
    expect((await getJob(payer, { db: t.db }))!.waitingFor).toMatchObject({ kind: "event", event: "payment", key: "o-2" });
    await sendEvent("payment", { ok: true }, { key: "o-2", tenant: "acme", db: t.db });
    expect((await getJob(payer, { db: t.db }))!.waitingFor).toBeNull();
  });

  it("a child wait: its step and the child's id; none once the child ended", async () => {
    const id = await enqueue("parent", null, { db: t.db, queue: "reads-child" });
    await processOne(handlers, { db: t.db, queue: "reads-child" });
    const [child] = await t.sql<{ id: number | string }>(`SELECT id FROM {jobs} WHERE task = 'child'`);
    expect((await getJobSteps(id, { db: t.db }))!.waitingFor).toEqual({ kind: "child", step: "sub", childId: Number(child!.id) });
    await processOne({ child: () => 1 }, { db: t.db, queue: "children" });
    expect((await getJobSteps(id, { db: t.db }))!.waitingFor).toBeNull();
    await processOne(handlers, { db: t.db, queue: "reads-child" });
    expect((await getJobSteps(id, { db: t.db }))!.steps.map((s) => `${s.name}:${s.kind}`)).toEqual(["sub:invoke"]);
  });

  it("the dashboard's job page says what a waiting job waits for, even before it saved any step", async () => {
    const id = await enqueue("forever", null, { db: t.db, queue: "page" });
    await processOne(handlers, { db: t.db, queue: "page" });
    const dashboard = createDashboard({ db: t.db, basePath: "/ops" });
    const server = createServer((req, res) => dashboard(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const page = await (await fetch(`${origin}/ops/jobs/${id}`)).text();
      const section = /<section id="steps">.*?<\/section>/s.exec(page)![0];
      expect(section).toContain('data-waiting-for="approval"');
      expect(section).toMatch(/for event <code>approved<\/code> of key <code>doc-1<\/code>\./);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
