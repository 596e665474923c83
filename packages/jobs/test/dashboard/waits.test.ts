// The dashboard's "Waiting" panel (issue 19): a flow's waiting jobs with their dependencies'
// states, and open batches counted by state with their callback. All backends.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueueBatch, enqueueMany, processOne } from "../../src/index.js";
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
});
