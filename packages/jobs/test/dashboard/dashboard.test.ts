import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, processOne, type JobContext } from "../../src/index.js";
import { createDashboard, escapeHtml, formatAge, progressBar } from "../../src/dashboard/index.js";
import { backends, deferred, waitFor, type TestDatabase } from "../helpers/backends.js";

const SCRIPT = "<script>alert(1)</script>";
const IMG = `"><img src=x onerror=alert(1)>`;
const BASE = "/admin/jobs";

describe("dashboard helpers", () => {
  it("escapes the five HTML metacharacters", () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe("&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
  });

  it("finds a progress bar in done/total, read/estimatedTotal, line/totalLines, and nothing else", () => {
    expect(progressBar({ done: 3, total: 10 })).toEqual({ value: 3, max: 10 });
    expect(progressBar({ read: 50, estimatedTotal: 200, errors: [] })).toEqual({ value: 50, max: 200 });
    expect(progressBar({ line: 7, totalLines: 70 })).toEqual({ value: 7, max: 70 });
    expect(progressBar({ done: 12, total: 10 })).toEqual({ value: 10, max: 10 });
    expect(progressBar({ read: 5, estimatedTotal: null })).toBeNull();
    expect(progressBar({ done: "3", total: 10 })).toBeNull();
    expect(progressBar({ done: 3, total: 0 })).toBeNull();
    expect(progressBar({ cursor: "abc" })).toBeNull();
    expect(progressBar(42)).toBeNull();
    expect(progressBar(null)).toBeNull();
  });

  it("formats ages coarsely", () => {
    expect([formatAge(null), formatAge(5.7), formatAge(125), formatAge(3725), formatAge(90000)]).toEqual(["—", "5s", "2m 5s", "1h 2m", "1d 1h"]);
  });

  it("refuses a bad basePath, refreshSeconds or a short secret when created", () => {
    const db = {} as never;
    expect(() => createDashboard({ db, basePath: "admin" })).toThrow(/basePath/);
    expect(() => createDashboard({ db, basePath: "/a b" })).toThrow(/basePath/);
    expect(() => createDashboard({ db, basePath: "/a", refreshSeconds: -1 })).toThrow(/refreshSeconds/);
    expect(() => createDashboard({ db, basePath: "/a", secret: "short" })).toThrow(/secret/);
  });
});

describe.each(backends())("the dashboard ($name)", (backend) => {
  let t: TestDatabase;
  let server: Server;
  let origin: string;
  const passedOn: string[] = [];

  beforeAll(async () => {
    t = await backend.create();
    const dashboard = createDashboard({ db: t.db, basePath: BASE, title: "Test queue", refreshSeconds: 7 });
    server = createServer((req, res) =>
      dashboard(req, res, () => {
        passedOn.push(req.url ?? "");
        res.statusCode = 418;
        res.end("not the dashboard's");
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await t.close();
  });

  async function load(query = ""): Promise<{ status: number; body: string; cookie: string; csrf: string; headers: Headers }> {
    const response = await fetch(`${origin}${BASE}${query}`);
    const body = await response.text();
    const cookie = (response.headers.get("set-cookie") ?? "").split(";")[0]!;
    const csrf = /name="csrf" value="([^"]+)"/.exec(body)?.[1] ?? "";
    return { status: response.status, body, cookie, csrf, headers: response.headers };
  }

  function post(path: string, form: Record<string, string>, cookie: string, type = "application/x-www-form-urlencoded") {
    return fetch(`${origin}${path}`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": type, cookie },
      body: new URLSearchParams(form).toString(),
    });
  }

  function section(body: string, id: string): string {
    return new RegExp(`<section id="${id}">([\\s\\S]*?)</section>`).exec(body)?.[1] ?? "";
  }

  function queueRow(body: string, queue: string): Record<string, number | string> {
    const row = new RegExp(`<tr data-queue="${queue}">([\\s\\S]*?)</tr>`).exec(body)?.[1];
    if (!row) throw new Error(`no row for queue ${queue}`);
    const counts: Record<string, number | string> = {};
    for (const m of row.matchAll(/data-count="(\w+)">(\d+)</g)) counts[m[1]!] = Number(m[2]);
    counts.age = /data-age>([^<]*)</.exec(row)?.[1] ?? "";
    return counts;
  }

  it("shows per-queue PENDING / RUNNING / FAILED / DONE / READY counts and the oldest ready job's age", async () => {
    await enqueue("ok", null, { db: t.db, queue: "counts-a" });
    await enqueue("boom", null, { db: t.db, queue: "counts-a" });
    await enqueue("ok", null, { db: t.db, queue: "counts-a" });
    await enqueue("later", null, { db: t.db, queue: "counts-a", availableIn: 600 });
    await enqueue("ok", null, { db: t.db, queue: "counts-b" });
    await processOne({ ok: () => 1 }, { db: t.db, queue: "counts-a" });
    await processOne({ boom: () => { throw new Error("nope"); } }, { db: t.db, queue: "counts-a" });
    const page = await load();
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(queueRow(page.body, "counts-a")).toEqual({ pending: 2, running: 0, failed: 1, done: 1, ready: 1, age: expect.stringMatching(/^\d+s$/) });
    expect(queueRow(page.body, "counts-b")).toMatchObject({ pending: 1, ready: 1 });
    expect(page.body).toContain('<meta http-equiv="refresh" content="7">');
    expect(page.body).toContain("<title>Test queue</title>");
  });

  it("sends a strict CSP (no script), nosniff, no-referrer and no-store", async () => {
    const { headers, body } = await load();
    expect(headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(headers.get("content-security-policy")).not.toContain("script-src");
    expect(headers.get("x-content-type-options")).toBe("nosniff");
    expect(headers.get("referrer-policy")).toBe("no-referrer");
    expect(headers.get("cache-control")).toBe("no-store");
    expect(body).not.toMatch(/<script|<link|<img|src=|https?:\/\//i);
  });

  it("shows running jobs with a progress bar, or their progress JSON", async () => {
    const release = deferred();
    const saved: Promise<void>[] = [];
    const progressOf: Record<string, unknown> = {
      "bar-done": { done: 3, total: 12 },
      "bar-read": { read: 50, estimatedTotal: 200 },
      "bar-lines": { line: 9, totalLines: 10 },
      "bar-json": { cursor: "k-17" },
    };
    const handler = async (_p: unknown, ctx: JobContext) => {
      await ctx.checkpoint(progressOf[ctx.job.queue]);
      await release.promise;
    };
    const ids: Record<string, number> = {};
    for (const queue of Object.keys(progressOf)) {
      ids[queue] = await enqueue("long", null, { db: t.db, queue });
      saved.push(processOne({ long: handler }, { db: t.db, queue }).then(() => undefined));
    }
    await waitFor("four checkpoints", async () => {
      for (const id of Object.values(ids)) if ((await getJob(id, { db: t.db }))?.progress === null) return false;
      return true;
    });
    const running = section((await load()).body, "running");
    const row = (queue: string) => new RegExp(`<tr id="job-${ids[queue]}"[\\s\\S]*?</tr>`).exec(running)?.[0] ?? "";
    expect(row("bar-done")).toContain('<progress value="3" max="12"');
    expect(row("bar-done")).toContain("25%");
    expect(row("bar-read")).toContain('<progress value="50" max="200"');
    expect(row("bar-lines")).toContain('<progress value="9" max="10"');
    expect(row("bar-json")).not.toContain("<progress");
    expect(row("bar-json")).toContain("{&quot;cursor&quot;:&quot;k-17&quot;}");
    release.resolve();
    await Promise.all(saved);
  });

  it("escapes everything it shows: task, queue, payload and error carrying markup never appear raw", async () => {
    const evilTask = `task${SCRIPT}${IMG}`;
    const evilQueue = `queue${IMG}${SCRIPT}`;
    const payload = { note: SCRIPT, [IMG]: IMG };
    await enqueue(evilTask, payload, { db: t.db, queue: evilQueue });
    await enqueue(evilTask, payload, { db: t.db, queue: evilQueue });
    await processOne({ [evilTask]: () => { throw new Error(`failed on ${SCRIPT} and ${IMG}`); } }, { db: t.db, queue: evilQueue });
    const { body } = await load(`?token=${encodeURIComponent(IMG)}`);
    expect(body).not.toContain(SCRIPT);
    expect(body).not.toContain(IMG);
    expect(body).not.toMatch(/<script|<img/i);
    // Shown, escaped: in the queue table, the pending list and the failures.
    expect(body).toContain(escapeHtml(evilQueue));
    expect(section(body, "failures")).toContain(escapeHtml(`failed on ${SCRIPT} and ${IMG}`));
    expect(section(body, "failures")).toContain(escapeHtml(evilTask));
    expect(section(body, "pending")).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
  });

  it("retries a failed job from a POST form with the CSRF token, and redirects back (303) keeping the query", async () => {
    const id = await enqueue("flaky", { n: 1 }, { db: t.db, queue: "retry-q" });
    await processOne({ flaky: () => { throw new Error("smtp down"); } }, { db: t.db, queue: "retry-q" });
    const page = await load("?token=s3cret");
    const failures = section(page.body, "failures");
    expect(failures).toContain(`action="${BASE}/jobs/${id}/retry?token=s3cret"`);
    expect(failures).toContain("smtp down");
    expect(page.cookie).toMatch(/^forge_jobs_csrf=/);
    expect(page.headers.get("set-cookie")).toMatch(/Path=\/admin\/jobs; HttpOnly; SameSite=Strict/);

    const response = await post(`${BASE}/jobs/${id}/retry?token=s3cret`, { csrf: page.csrf }, page.cookie);
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toBe(`${BASE}?token=s3cret`);
    expect((await getJob(id, { db: t.db }))?.status).toBe("pending");

    // What happened is shown once, by the next load (a flash cookie), not by every reload.
    const flash = response.headers.get("set-cookie")!.split(";")[0]!;
    expect(flash).toBe(`forge_jobs_notice=retried.${id}`);
    const after = await fetch(`${origin}${response.headers.get("location")}`, { headers: { cookie: `${page.cookie}; ${flash}` } });
    const body = await after.text();
    expect(body).toContain(`Job #${id} is back in its queue.`);
    expect(after.headers.get("set-cookie")).toContain("forge_jobs_notice=; Path=/admin/jobs; Max-Age=0");
    expect(section(body, "pending")).toContain(`id="job-${id}"`);
    expect(await (await fetch(`${origin}${BASE}?token=s3cret`, { headers: { cookie: page.cookie } })).text()).not.toContain('class="notice"');
    // The same form again: the job is no longer failed.
    const again = await post(`${BASE}/jobs/${id}/retry?token=s3cret`, { csrf: page.csrf }, page.cookie);
    expect(again.headers.get("set-cookie")).toContain(`forge_jobs_notice=not-retried.${id}`);
  });

  it("shows only the notices it knows, from a well-formed cookie", async () => {
    for (const cookie of ["forge_jobs_notice=<script>.1", "forge_jobs_notice=hacked.1", "forge_jobs_notice=retried.x", "forge_jobs_notice=retried"]) {
      const body = await (await fetch(`${origin}${BASE}`, { headers: { cookie } })).text();
      expect(body).not.toContain('class="notice"');
    }
    const body = await (await fetch(`${origin}${BASE}`, { headers: { cookie: "forge_jobs_notice=not-cancelled.42" } })).text();
    expect(body).toContain("Job #42 was not cancelled: it is no longer pending or running.");
  });

  it("cancels a pending job", async () => {
    const id = await enqueue("never", null, { db: t.db, queue: "cancel-q" });
    const page = await load();
    expect(section(page.body, "pending")).toContain(`action="${BASE}/jobs/${id}/cancel"`);
    const response = await post(`${BASE}/jobs/${id}/cancel`, { csrf: page.csrf }, page.cookie);
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toBe(BASE);
    expect(response.headers.get("set-cookie")).toContain(`forge_jobs_notice=cancelled.${id}`);
    expect((await getJob(id, { db: t.db }))?.status).toBe("cancelled");
  });

  it("refuses an action without the CSRF token, with another browser's token, or without the cookie (403), changing nothing", async () => {
    const id = await enqueue("keep", null, { db: t.db, queue: "csrf-q" });
    const mine = await load();
    const theirs = await load();
    expect(theirs.cookie).not.toBe(mine.cookie);
    for (const [form, cookie] of [
      [{}, mine.cookie],
      [{ csrf: "" }, mine.cookie],
      [{ csrf: theirs.csrf }, mine.cookie],
      [{ csrf: mine.csrf }, ""],
      [{ csrf: mine.csrf }, "forge_jobs_csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
    ] as const) {
      const response = await post(`${BASE}/jobs/${id}/cancel`, form, cookie);
      expect(response.status).toBe(403);
    }
    expect((await getJob(id, { db: t.db }))?.status).toBe("pending");
  });

  it("binds tokens to the secret: a second instance accepts them only when it shares the secret", async () => {
    const secret = "a shared secret of enough bytes";
    const serve = async (handler: ReturnType<typeof createDashboard>, run: (url: string) => Promise<void>) => {
      const s = createServer((req, res) => handler(req, res));
      await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
      try {
        await run(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
      } finally {
        await new Promise((resolve) => s.close(resolve));
      }
    };
    const id = await enqueue("keep", null, { db: t.db, queue: "secret-q" });
    const a = createDashboard({ db: t.db, basePath: BASE, secret });
    const b = createDashboard({ db: t.db, basePath: BASE, secret });
    const c = createDashboard({ db: t.db, basePath: BASE });
    let cookie = "";
    let csrf = "";
    await serve(a, async (url) => {
      const response = await fetch(`${url}${BASE}`);
      cookie = response.headers.get("set-cookie")!.split(";")[0]!;
      csrf = /name="csrf" value="([^"]+)"/.exec(await response.text())![1]!;
    });
    const attempt = (url: string) =>
      fetch(`${url}${BASE}/jobs/${id}/cancel`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", cookie },
        body: `csrf=${encodeURIComponent(csrf)}`,
      });
    await serve(c, async (url) => expect((await attempt(url)).status).toBe(403));
    await serve(b, async (url) => expect((await attempt(url)).status).toBe(303));
    expect((await getJob(id, { db: t.db }))?.status).toBe("cancelled");
  });

  it("keeps the browser's cookie across loads, so open pages stay valid", async () => {
    const first = await load();
    const response = await fetch(`${origin}${BASE}`, { headers: { cookie: first.cookie } });
    expect(response.headers.get("set-cookie")).toBeNull();
    expect(await response.text()).toContain(`value="${first.csrf}"`);
  });

  it("answers 415 to a non-form post, 413 to an oversized one, 405 to a wrong method, 404 inside its path, and passes the rest on", async () => {
    const page = await load();
    expect((await post(`${BASE}/jobs/1/retry`, { csrf: page.csrf }, page.cookie, "application/json")).status).toBe(415);
    expect((await post(`${BASE}/jobs/1/retry`, { csrf: page.csrf, pad: "x".repeat(10_000) }, page.cookie)).status).toBe(413);
    expect((await fetch(`${origin}${BASE}/jobs/1/retry`)).status).toBe(405);
    expect((await fetch(`${origin}${BASE}`, { method: "DELETE" })).status).toBe(405);
    expect((await fetch(`${origin}${BASE}/nothing`)).status).toBe(404);
    expect((await fetch(`${origin}${BASE}/`)).status).toBe(200);
    expect((await fetch(`${origin}${BASE}`, { method: "HEAD" })).status).toBe(200);
    expect((await fetch(`${origin}/admin/jobsx`)).status).toBe(418);
    expect((await fetch(`${origin}/elsewhere`)).status).toBe(418);
    expect(passedOn).toEqual(["/admin/jobsx", "/elsewhere"]);
  });

  it("works mounted Express-style: req.url stripped of the mount path, originalUrl kept, body already parsed", async () => {
    const dashboard = createDashboard({ db: t.db, basePath: BASE });
    const mounted = createServer(async (req, res) => {
      const full = req.url ?? "/";
      if (!full.startsWith(BASE)) return void res.writeHead(404).end();
      Object.assign(req, { originalUrl: full });
      req.url = full.slice(BASE.length) || "/";
      if (req.method === "POST") {
        let text = "";
        for await (const chunk of req) text += String(chunk);
        Object.assign(req, { body: Object.fromEntries(new URLSearchParams(text)) });
      }
      dashboard(req, res, (error) => res.writeHead(error ? 500 : 404).end());
    });
    await new Promise<void>((resolve) => mounted.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(mounted.address() as AddressInfo).port}`;
    try {
      const id = await enqueue("express", null, { db: t.db, queue: "express-q" });
      const page = await fetch(`${url}${BASE}`);
      const body = await page.text();
      expect(body).toContain(`action="${BASE}/jobs/${id}/cancel"`);
      const cookie = page.headers.get("set-cookie")!.split(";")[0]!;
      const csrf = /name="csrf" value="([^"]+)"/.exec(body)![1]!;
      const response = await fetch(`${url}${BASE}/jobs/${id}/cancel`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", cookie },
        body: new URLSearchParams({ csrf }).toString(),
      });
      expect(response.status).toBe(303);
      expect((await getJob(id, { db: t.db }))?.status).toBe("cancelled");
    } finally {
      await new Promise((resolve) => mounted.close(resolve));
    }
  });

  it("lists at most 20 jobs per section, newest first", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 25; i++) ids.push(await enqueue("crash", { i }, { db: t.db, queue: "many-q" }));
    for (let i = 0; i < 25; i++) await processOne({ crash: () => { throw new Error("x"); } }, { db: t.db, queue: "many-q" });
    const failures = section((await load()).body, "failures");
    const shown = [...failures.matchAll(/<tr id="job-(\d+)"/g)].map((m) => Number(m[1]));
    expect(shown).toHaveLength(20);
    expect(shown).toEqual([...shown].sort((a, b) => b - a));
    expect(shown[0]).toBe(ids[24]);
    expect(failures).toContain("(latest 20)");
  });
});
