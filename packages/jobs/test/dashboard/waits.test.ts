// The dashboard's "Waiting" panel (issue 19): a flow's waiting jobs with their dependencies'
// states, and open batches counted by state with their callback. All backends.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, enqueueBatch, enqueueMany, processOne } from "../../src/index.js";
import { createDashboard } from "../../src/dashboard/index.js";
import { backends, type TestDatabase } from "../helpers/backends.js";

const BASE = "/admin/jobs";
const SCRIPT = "<script>alert(1)</script>";

describe.each(backends())("the dashboard's waiting panel ($name)", (backend) => {
  let t: TestDatabase;
  let server: Server;
  let origin: string;

  beforeAll(async () => {
    t = await backend.create();
    const dashboard = createDashboard({ db: t.db, basePath: BASE });
    server = createServer((req, res) => dashboard(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await t.close();
  });

  const section = async () => /<section id="waiting">([\s\S]*?)<\/section>/.exec(await (await fetch(`${origin}${BASE}`)).text())?.[1] ?? "";

  it("shows a flow's waiting job with its dependencies' states, and a batch's items by state", async () => {
    expect(await section()).toBe("");
    const [render, zip] = await enqueueMany(
      [
        { task: "render", ref: "r" },
        { task: SCRIPT, ref: "s" },
        { task: "zip", dependsOn: ["r", "s"] },
      ],
      { db: t.db, queue: "flow" },
    ).then((ids) => [ids[0], ids[2]]);
    const { batchId, callbackId } = await enqueueBatch([{ task: "item" }, { task: "item" }], { db: t.db, queue: "batch", onComplete: { task: "after" } });
    await processOne({ render: () => 1 }, { db: t.db, queue: "flow" });
    await processOne({ item: () => 1 }, { db: t.db, queue: "batch" });
    const panel = await section();
    expect(panel).toContain(`<tr data-waiting="${zip}">`);
    expect(panel).toContain(`data-dependency="${render}" data-status="done"`);
    expect(panel).not.toContain(SCRIPT);
    const batch = new RegExp(`<tr data-batch="${batchId}">([\\s\\S]*?)</tr>`).exec(panel)?.[1] ?? "";
    expect(batch).toContain('<td data-count="done">1</td>');
    expect(batch).toContain('<td data-count="pending">1</td>');
    expect(batch).toContain(`#${callbackId} after (waiting)`);
  });

  it("the queue table counts waiting jobs in a WAITING column, apart from pending", async () => {
    const queue = "waiting-count";
    const first = await enqueue("step", null, { db: t.db, queue });
    await enqueue("after", null, { db: t.db, queue, dependsOn: [first] });
    await enqueue("after", null, { db: t.db, queue, dependsOn: [first] });
    await enqueueBatch([{ task: "item" }], { db: t.db, queue, onComplete: { task: "done" } });
    const body = await (await fetch(`${origin}${BASE}`)).text();
    expect(body).toContain('<th class="n">PENDING</th><th class="n">WAITING</th>');
    const row = new RegExp(`<tr data-queue="${queue}">([\\s\\S]*?)</tr>`).exec(body)?.[1] ?? "";
    expect(row).toContain('data-count="pending">2</td>');
    expect(row).toContain('data-count="waiting">3</td>');
  });
});
