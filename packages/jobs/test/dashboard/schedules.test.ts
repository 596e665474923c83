import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listSchedules, schedule } from "../../src/index.js";
import { createDashboard } from "../../src/dashboard/index.js";
import { escapeHtml } from "../../src/dashboard/escape.js";
import { backends, type TestDatabase } from "../helpers/backends.js";

const BASE = "/admin/jobs";
const SCRIPT = "<script>alert(1)</script>";

describe.each(backends())("the dashboard's schedules ($name)", (backend) => {
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

  async function load(cookie = ""): Promise<{ body: string; cookie: string; csrf: string }> {
    const response = await fetch(`${origin}${BASE}`, { headers: cookie ? { cookie } : {} });
    const body = await response.text();
    return { body, cookie: cookie || (response.headers.get("set-cookie") ?? "").split(";")[0]!, csrf: /name="csrf" value="([^"]+)"/.exec(body)?.[1] ?? "" };
  }
  const post = (path: string, csrf: string, cookie: string) =>
    fetch(`${origin}${BASE}${path}`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: new URLSearchParams({ csrf }).toString(),
    });
  const section = (body: string) => /<section id="schedules">([\s\S]*?)<\/section>/.exec(body)?.[1] ?? "";
  const row = (body: string, name: string) => new RegExp(`<tr data-schedule="${escapeHtml(name)}"[^>]*>([\\s\\S]*?)</tr>`).exec(section(body))?.[0] ?? "";

  it("lists schedules with next and last run; pause, resume and run now act on one (with a flash notice)", async () => {
    expect(section((await load()).body)).toContain("No schedules");
    await schedule("digest", "0 7 * * *", { task: "send-digest", timezone: "Europe/Paris", queue: "mail", db: t.db });
    await schedule(`esc ${SCRIPT}`, "@hourly", { task: SCRIPT, db: t.db });
    const page = await load();
    const digest = row(page.body, "digest");
    expect(digest).toContain('data-paused="false"');
    expect(digest).toContain("<code>0 7 * * *</code>");
    expect(digest).toMatch(/<td data-next><time datetime="\d{4}-\d\d-\d\dT0[56]:00:00.000Z">/);
    expect(digest).toContain('data-action="pause"');
    expect(section(page.body)).not.toContain(SCRIPT);
    expect(section(page.body)).toContain(escapeHtml(SCRIPT));

    const paused = await post("/schedules/digest/pause", page.csrf, page.cookie);
    expect(paused.status).toBe(303);
    expect(paused.headers.get("set-cookie")).toContain("forge_jobs_notice=schedule-paused.0");
    expect((await listSchedules({ db: t.db })).find((s) => s.name === "digest")!.paused).toBe(true);
    const after = await load(page.cookie);
    expect(row(after.body, "digest")).toContain('data-paused="true"');
    expect(row(after.body, "digest")).toContain('data-action="resume"');

    await post("/schedules/digest/resume", page.csrf, page.cookie);
    expect((await listSchedules({ db: t.db })).find((s) => s.name === "digest")!.paused).toBe(false);

    const run = await post(`/schedules/${encodeURIComponent(`esc ${SCRIPT}`)}/trigger`, page.csrf, page.cookie);
    const id = Number(/forge_jobs_notice=schedule-triggered\.(\d+)/.exec(run.headers.get("set-cookie") ?? "")![1]);
    expect(await t.sql("SELECT task, queue FROM {jobs} WHERE id = $1", [id])).toEqual([{ task: SCRIPT, queue: "default" }]);

    expect((await post("/schedules/nope/trigger", page.csrf, page.cookie)).headers.get("set-cookie")).toContain("forge_jobs_notice=schedule-missing.0");
    expect((await post("/schedules/digest/pause", "forged", page.cookie)).status).toBe(403);
    expect((await fetch(`${origin}${BASE}/schedules/digest/pause`)).status).toBe(405);
  });
});
