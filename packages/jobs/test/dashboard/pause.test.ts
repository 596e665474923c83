import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, pauseQueue, resumeQueue, statusCounts } from "../../src/index.js";
import { createDashboard } from "../../src/dashboard/index.js";
import { escapeHtml } from "../../src/dashboard/escape.js";
import { backends, uniqueName, type TestDatabase } from "../helpers/backends.js";

const BASE = "/admin/jobs";
const SCRIPT = "<script>alert(1)</script>";

describe.each(backends())("the dashboard's queue pause and resume ($name)", (backend) => {
  let t: TestDatabase;
  let server: Server;
  let origin: string;

  beforeAll(async () => {
    t = await backend.create();
    const dashboard = createDashboard({ db: t.db, basePath: BASE });
    const tenants = createDashboard({ db: t.db, basePath: "/tenant", tenant: "acme" });
    server = createServer((req, res) => (req.url?.startsWith("/tenant") ? tenants(req, res) : dashboard(req, res)));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await t.close();
  });

  async function load(path = BASE, cookie = ""): Promise<{ body: string; cookie: string; csrf: string }> {
    const response = await fetch(`${origin}${path}`, { headers: cookie ? { cookie } : {} });
    const body = await response.text();
    return { body, cookie: cookie || (response.headers.get("set-cookie") ?? "").split(";")[0]!, csrf: /name="csrf" value="([^"]+)"/.exec(body)?.[1] ?? "" };
  }
  const post = (path: string, csrf: string, cookie: string) =>
    fetch(`${origin}${path}`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: new URLSearchParams({ csrf }).toString(),
    });
  const row = (body: string, queue: string) => {
    const start = body.indexOf(`<tr data-queue="${escapeHtml(queue)}">`);
    return start < 0 ? "" : body.slice(start, body.indexOf("</tr>", start));
  };
  const paused = async (queue: string) => (await statusCounts({ db: t.db, queue }))[0]!.paused;

  it("each queue's row shows its state and a Pause or Resume button; the CSRF-checked POST pauses and resumes it", async () => {
    const queue = uniqueName("mail");
    await enqueue("send", null, { db: t.db, queue });
    const page = await load();
    expect(row(page.body, queue)).toContain('<td data-state="active">active</td>');
    expect(row(page.body, queue)).toContain(`action="${BASE}/queues/${queue}/pause"`);

    const done = await post(`${BASE}/queues/${queue}/pause`, page.csrf, page.cookie);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(BASE);
    expect(done.headers.get("set-cookie")).toContain("forge_jobs_notice=queue-paused.0");
    expect(await paused(queue)).toBe(true);
    const notice = (done.headers.get("set-cookie") ?? "").split(";")[0]!;
    const after = await load(BASE, `${page.cookie}; ${notice}`);
    expect(row(after.body, queue)).toContain('data-state="paused"');
    expect(row(after.body, queue)).toContain('data-action="resume"');
    expect(after.body).toContain("The queue is paused");
    expect((await post(`${BASE}/queues/${queue}/pause`, page.csrf, page.cookie)).headers.get("set-cookie")).toContain("queue-already-paused.0");

    expect((await post(`${BASE}/queues/${queue}/resume`, page.csrf, page.cookie)).headers.get("set-cookie")).toContain("queue-resumed.0");
    expect(await paused(queue)).toBe(false);
  });

  it("refuses a forged token, a GET, and acts on no queue from a tenant's dashboard; names are escaped", async () => {
    const queue = uniqueName("q");
    await enqueue("send", null, { db: t.db, queue });
    const page = await load();
    expect((await post(`${BASE}/queues/${queue}/pause`, "forged", page.cookie)).status).toBe(403);
    expect((await fetch(`${origin}${BASE}/queues/${queue}/pause`)).status).toBe(405);
    expect(await paused(queue)).toBe(false);

    const tenant = await load("/tenant");
    expect(tenant.body).not.toContain("/queues/");
    expect((await post(`/tenant/queues/${queue}/pause`, tenant.csrf, tenant.cookie)).status).toBe(404);
    expect(await paused(queue)).toBe(false);

    const odd = `odd ${SCRIPT}`;
    await pauseQueue(odd, { db: t.db });
    const shown = await load();
    expect(shown.body).not.toContain(SCRIPT);
    expect(row(shown.body, odd)).toContain(`action="${BASE}/queues/${encodeURIComponent(odd)}/resume"`);
    await post(`${BASE}/queues/${encodeURIComponent(odd)}/resume`, shown.csrf, shown.cookie);
    expect(await resumeQueue(odd, { db: t.db })).toBe(false);
  });
});
