import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { cancelJob, enqueue, getJob, processOne, setGroupWeight, setLimit, type JobContext } from "../../src/index.js";
import { createDashboard } from "../../src/dashboard/index.js";
import { escapeHtml } from "../../src/dashboard/escape.js";
import { formatAge, progressBar } from "../../src/dashboard/render.js";
import { recentActivity } from "../../src/dashboard/queries.js";
import { formatDuration, waitTimes } from "../../src/flow/wait-times.js";
import { mysql as mysqlDialect } from "../../src/dialects/mysql.js";
import { sqlite as sqliteDialect } from "../../src/dialects/sqlite.js";
import { backends, deferred, waitFor, type Backend, type TestDatabase } from "../helpers/backends.js";

const SCRIPT = "<script>alert(1)</script>";
const IMG = `"><img src=x onerror=alert(1)>`;
const BASE = "/admin/jobs";

/** SQL for "the database clock, `seconds` ago". */
const AGO: Record<Backend["name"], (seconds: number) => string> = {
  postgres: (seconds) => `now() - make_interval(secs => ${seconds})`,
  sqlite: (seconds) => sqliteDialect.nowPlus(String(seconds), "-"),
  mysql: (seconds) => mysqlDialect.nowPlus(String(seconds), "-"),
};

const minuteOf = (date: Date) => Math.floor(date.getTime() / 60_000);
const utcMinute = (minute: number) => `${new Date(minute * 60_000).toISOString().slice(11, 16)} UTC`;

interface Bar {
  minute: number;
  ago: number;
  done: number;
  failed: number;
  title: string;
  heights: Record<string, number>;
}

/** A queue's chart on the page: its SVG and bars (one per minute with jobs, exact counts in data- attributes and in its title). */
function chartOf(body: string, queue: string): { svg: string; bars: Bar[] } {
  const figure = new RegExp(`<figure data-queue="${queue}">([\\s\\S]*?)</figure>`).exec(body)?.[1];
  const svg = figure ? /<svg class="chart"[\s\S]*?<\/svg>/.exec(figure)?.[0] : undefined;
  if (!svg) throw new Error(`no chart for queue ${queue}`);
  const bars = [
    ...svg.matchAll(/<g class="bar" data-minute="(\d+)" data-ago="(\d+)" data-done="(\d+)" data-failed="(\d+)"><title>([^<]*)<\/title>([\s\S]*?)<\/g>/g),
  ].map((m) => ({
    minute: Number(m[1]),
    ago: Number(m[2]),
    done: Number(m[3]),
    failed: Number(m[4]),
    title: m[5]!,
    heights: Object.fromEntries([...m[6]!.matchAll(/<rect class="(\w+)"[^>]* height="([\d.]+)"/g)].map((r) => [r[1]!, Number(r[2])])),
  }));
  return { svg, bars };
}

function waitCell(body: string, queue: string, which: "p50" | "p95"): { text: string; ms: number | null } {
  const row = new RegExp(`<tr data-queue="${queue}">([\\s\\S]*?)</tr>`).exec(body)?.[1] ?? "";
  const cell = new RegExp(`<td class="n[^"]*" data-wait="${which}"(?: data-ms="(\\d+)")?[^>]*>([^<]*)</td>`).exec(row);
  if (!cell) throw new Error(`no ${which} cell for queue ${queue}`);
  return { text: cell[2]!, ms: cell[1] === undefined ? null : Number(cell[1]) };
}

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

  it("formats wait times in ms, s, min and h", () => {
    expect([0, 12.4, 999.4, 999.6, 1500, 30_040, 59_900, 60_000, 150_000, 599_000, 3_600_000, 7_200_000].map(formatDuration)).toEqual([
      "0 ms",
      "12 ms",
      "999 ms",
      "1.0 s",
      "1.5 s",
      "30 s",
      "60 s",
      "1.0 min",
      "2.5 min",
      "10 min",
      "1.0 h",
      "2.0 h",
    ]);
    expect([formatDuration(null), formatDuration(undefined), formatDuration(NaN), formatDuration(-5)]).toEqual(["—", "—", "—", "0 ms"]);
  });

  it("takes p50 and p95 between the closest ranks, as percentile_cont does", () => {
    expect(waitTimes([])).toMatchObject({ sample: 0, p50: NaN, p95: NaN });
    expect(waitTimes([7])).toEqual({ p50: 7, p95: 7, sample: 1 });
    expect(waitTimes([30, 150, 30, 30, 150, 30])).toEqual({ p50: 30, p95: 150, sample: 6 });
    expect(waitTimes(Array.from({ length: 101 }, (_, i) => 100 - i))).toEqual({ p50: 50, p95: 95, sample: 101 });
    expect(waitTimes([0, 10])).toEqual({ p50: 5, p95: 9.5, sample: 2 });
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
    await processOne(
      {
        boom: () => {
          throw new Error("nope");
        },
      },
      { db: t.db, queue: "counts-a" },
    );
    const page = await load();
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(queueRow(page.body, "counts-a")).toEqual({ waiting: 0, pending: 2, running: 0, failed: 1, done: 1, ready: 1, age: expect.stringMatching(/^\d+s$/) });
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
    await processOne(
      {
        [evilTask]: () => {
          throw new Error(`failed on ${SCRIPT} and ${IMG}`);
        },
      },
      { db: t.db, queue: evilQueue },
    );
    const { body } = await load(`?q=${encodeURIComponent(IMG)}`);
    expect(body).not.toContain(SCRIPT);
    expect(body).not.toContain(IMG);
    expect(body).not.toMatch(/<script|<img/i);
    // Shown, escaped: in the queue table, the pending list and the failures.
    expect(body).toContain(escapeHtml(evilQueue));
    expect(section(body, "failures")).toContain(escapeHtml(`failed on ${SCRIPT} and ${IMG}`));
    expect(section(body, "failures")).toContain(escapeHtml(evilTask));
    expect(section(body, "pending")).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
  });

  it("retries a failed job from a POST form with the CSRF token, and redirects back (303) to the overview", async () => {
    const id = await enqueue("flaky", { n: 1 }, { db: t.db, queue: "retry-q" });
    await processOne(
      {
        flaky: () => {
          throw new Error("smtp down");
        },
      },
      { db: t.db, queue: "retry-q" },
    );
    const page = await load();
    const failures = section(page.body, "failures");
    expect(failures).toContain(`action="${BASE}/jobs/${id}/retry"`);
    expect(failures).toContain("smtp down");
    expect(page.cookie).toMatch(/^forge_jobs_csrf=/);
    expect(page.headers.get("set-cookie")).toMatch(/Path=\/admin\/jobs; HttpOnly; SameSite=Strict/);

    const response = await post(`${BASE}/jobs/${id}/retry`, { csrf: page.csrf }, page.cookie);
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toBe(BASE);
    expect((await getJob(id, { db: t.db }))?.status).toBe("pending");

    // What happened is shown once, by the next load (a flash cookie), not by every reload.
    const flash = response.headers.get("set-cookie")!.split(";")[0]!;
    expect(flash).toBe(`forge_jobs_notice=retried.${id}`);
    const after = await fetch(`${origin}${response.headers.get("location")}`, { headers: { cookie: `${page.cookie}; ${flash}` } });
    const body = await after.text();
    expect(body).toContain(`Job #${id} is back in its queue.`);
    expect(after.headers.get("set-cookie")).toContain("forge_jobs_notice=; Path=/admin/jobs; Max-Age=0");
    expect(section(body, "pending")).toContain(`id="job-${id}"`);
    expect(await (await fetch(`${origin}${BASE}`, { headers: { cookie: page.cookie } })).text()).not.toContain('class="notice"');
    // The same form again: the job is no longer failed.
    const again = await post(`${BASE}/jobs/${id}/retry`, { csrf: page.csrf }, page.cookie);
    expect(again.headers.get("set-cookie")).toContain(`forge_jobs_notice=not-retried.${id}`);
  });

  it("a retry refused because another active job holds the dedup key comes back as a notice, not an error page (audit 12.11)", async () => {
    const id = await enqueue("sync", null, { db: t.db, queue: "held-q", dedupKey: "dash-held" });
    await processOne(
      {
        sync: () => {
          throw Object.assign(new Error("down"), { retryable: false });
        },
      },
      { db: t.db, queue: "held-q" },
    );
    await enqueue("sync", null, { db: t.db, queue: "held-q", dedupKey: "dash-held" });
    const page = await load();
    const response = await post(`${BASE}/jobs/${id}/retry`, { csrf: page.csrf }, page.cookie);
    expect(response.status).toBe(303);
    const flash = response.headers.get("set-cookie")!.split(";")[0]!;
    expect(flash).toBe(`forge_jobs_notice=retry-held.${id}`);
    const body = await (await fetch(`${origin}${BASE}`, { headers: { cookie: `${page.cookie}; ${flash}` } })).text();
    expect(body).toContain(`Job #${id} was not retried: another pending or running job holds its dedup key.`);
    expect((await getJob(id, { db: t.db }))?.status).toBe("failed");
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
    // Fire and forget, as Node calls a request listener; a body that cannot be read ends the response.
    const mounted = createServer(
      (req, res) =>
        void (async () => {
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
        })().catch((error: Error) => res.destroy(error)),
    );
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

  it("shows a Limits panel (running, concurrency, rate, throttled per limit) and a Groups panel (weight, ready, running, wait p50/p95)", async () => {
    expect(section((await load()).body, "limits")).toContain("No limits set");
    expect((await load()).body).not.toContain('<section id="groups">');
    // Keyed and grouped jobs by SQL until the enqueue options `concurrencyKey` and `group` land.
    const job = async (key: string, group: string, running: boolean) => {
      const id = await enqueue("flow", null, { db: t.db, queue: "flow-q" });
      await t.sql("UPDATE {jobs} SET concurrency_key = $1, group_key = $2 WHERE id = $3", [key, group, id]);
      if (running) {
        await t.sql(
          `UPDATE {jobs} SET status = 'running', run_at = ${AGO[backend.name](3)}, started_at = ${AGO[backend.name](1)}, locked_until = ${t.db.sql.nowPlus("600")}, claim_token = $1 WHERE id = $2`,
          [randomUUID(), id],
        );
      }
    };
    await setLimit("smtp:ses", { concurrency: 1, rate: { limit: 14, perSeconds: 1 } }, { db: t.db });
    await setLimit("org:*", { concurrency: 2 }, { db: t.db });
    await setLimit(`esc:${SCRIPT}`, { concurrency: 1 }, { db: t.db });
    await job("smtp:ses", "acme", true);
    await job("smtp:ses", "acme", false);
    await job("smtp:ses", "acme", false);
    await job("org:1", "", true);
    await job("org:2", "", false);
    await setGroupWeight("acme", 3, { db: t.db });
    const { body } = await load();
    const limits = section(body, "limits");
    const row = (key: string) => new RegExp(`<tr data-limit="${escapeHtml(key).replace(/[*]/g, "\\*")}">([\\s\\S]*?)</tr>`).exec(limits)?.[1] ?? "";
    const cells = (key: string) => ({
      running: Number(/data-count="running">(\d+)</.exec(row(key))?.[1]),
      throttled: Number(/data-count="throttled">(\d+)</.exec(row(key))?.[1]),
      concurrency: /data-limit-concurrency(?:="\d+")?>([^<]*)</.exec(row(key))?.[1],
      rate: /data-limit-rate(?:="[^"]*")?[^>]*>([^<]*)</.exec(row(key))?.[1],
    });
    expect(cells("smtp:ses")).toEqual({ running: 1, throttled: 2, concurrency: "1", rate: "14 / 1 s (burst 14)" });
    expect(cells("org:*")).toEqual({ running: 1, throttled: 0, concurrency: "2 per key", rate: "—" });
    expect(limits).not.toContain(SCRIPT);
    expect(limits).toContain(escapeHtml(`esc:${SCRIPT}`));
    const groups = section(body, "groups");
    const acme = /<tr data-group="acme">([\s\S]*?)<\/tr>/.exec(groups)?.[1] ?? "";
    expect(/data-weight>(\d+)</.exec(acme)?.[1]).toBe("3");
    expect(/data-count="ready">(\d+)</.exec(acme)?.[1]).toBe("2");
    expect(/data-count="running">(\d+)</.exec(acme)?.[1]).toBe("1");
    expect(/data-wait="p50" data-ms="(\d+)">2\.0 s</.exec(acme)?.[1]).toBe("2000");
  });

  it("lists at most 20 jobs per section, newest first", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 25; i++) ids.push(await enqueue("crash", { i }, { db: t.db, queue: "many-q" }));
    for (let i = 0; i < 25; i++)
      await processOne(
        {
          crash: () => {
            throw new Error("x");
          },
        },
        { db: t.db, queue: "many-q" },
      );
    const failures = section((await load()).body, "failures");
    const shown = [...failures.matchAll(/<tr id="job-(\d+)"/g)].map((m) => Number(m[1]));
    expect(shown).toHaveLength(20);
    expect(shown).toEqual([...shown].sort((a, b) => b - a));
    expect(shown[0]).toBe(ids[24]);
    expect(failures).toContain("(latest 20)");
  });

  it("charts the last hour's done and failed jobs per minute by the database clock, with exact counts in each bar's title, and the wait p50/p95", async () => {
    const queue = "chart-q";
    const ids: number[] = [];
    for (const fail of [false, true, false, false, true, false]) ids.push(await enqueue("chart", { fail }, { db: t.db, queue }));
    // Known waits: four jobs ready 30 s ago, two 150 s ago (started_at - run_at once claimed).
    await t.sql(`UPDATE {jobs} SET run_at = ${AGO[backend.name](30)} WHERE id IN ($1, $2, $3, $4)`, [ids[0], ids[1], ids[2], ids[3]]);
    await t.sql(`UPDATE {jobs} SET run_at = ${AGO[backend.name](150)} WHERE id IN ($1, $2)`, [ids[4], ids[5]]);
    const chartTask = {
      chart: (payload: unknown) => {
        if ((payload as { fail: boolean }).fail) throw new Error("chart failure");
      },
    };
    const before = minuteOf(await t.now());
    for (let i = 0; i < 6; i++) expect(await processOne(chartTask, { db: t.db, queue })).toBe(true);
    // Ten minutes ago, inside the window; two hours ago, outside it; cancelled: not charted.
    const old = await enqueue("chart", { fail: false }, { db: t.db, queue });
    const older = await enqueue("chart", { fail: false }, { db: t.db, queue });
    await processOne(chartTask, { db: t.db, queue });
    await processOne(chartTask, { db: t.db, queue });
    const backdate = (id: number, seconds: number) => {
      const ago = AGO[backend.name](seconds);
      return t.sql(`UPDATE {history} SET run_at = ${ago}, started_at = ${ago}, finished_at = ${ago} WHERE id = $1`, [id]);
    };
    await backdate(old, 600);
    await backdate(older, 7200);
    const cancelled = await enqueue("chart", { fail: false }, { db: t.db, queue });
    await cancelJob(cancelled, { db: t.db });

    const { body } = await load();
    const after = minuteOf(await t.now());
    const { svg, bars } = chartOf(body, queue);
    const oldJob = await getJob(old, { db: t.db });
    if (oldJob?.status !== "done") throw new Error(`job ${old} is not done`);
    const oldMinute = minuteOf(oldJob.finishedAt);

    // Every bar's title carries its exact counts; the window holds the six of this minute and the one of ten minutes ago.
    for (const bar of bars) expect(bar.title).toBe(`${utcMinute(bar.minute)}: ${bar.done} done, ${bar.failed} failed`);
    const recent = bars.filter((bar) => bar.minute >= before);
    expect(recent.reduce((n, bar) => n + bar.done, 0)).toBe(4);
    expect(recent.reduce((n, bar) => n + bar.failed, 0)).toBe(2);
    expect(bars.filter((bar) => bar.minute < before)).toMatchObject([{ minute: oldMinute, done: 1, failed: 0 }]);
    expect(svg).toContain(`<title>${queue}: 5 done, 2 failed in the last 60 minutes</title>`);
    expect(svg).toContain(">60 min ago<");
    expect(svg).toContain(">now<");
    if (before === after) {
      // The last slot is the database's current minute.
      expect(recent).toMatchObject([{ minute: after, ago: 0, done: 4, failed: 2, title: `${utcMinute(after)}: 4 done, 2 failed` }]);
      expect(bars[0]).toMatchObject({ ago: after - oldMinute });
      expect(svg).toContain('data-axis="max">6/min<');
      // Stacked: done twice as tall as failed, together the full height; the old minute's single job a sixth of it.
      expect(recent[0]!.heights.done).toBeCloseTo(2 * recent[0]!.heights.failed!, 0);
      expect(bars[0]!.heights).toEqual({ done: expect.closeTo(recent[0]!.heights.done! / 4, 0) });
    }

    // Waits: started_at - run_at of the jobs started in the window (the old one: 0).
    const p50 = waitCell(body, queue, "p50");
    const p95 = waitCell(body, queue, "p95");
    expect(p50.ms).toBeGreaterThanOrEqual(30_000);
    expect(p50.ms).toBeLessThan(35_000);
    expect(p50.text).toBe(formatDuration(p50.ms));
    expect(p50.text).toMatch(/^3\d s$/);
    expect(p95.ms).toBeGreaterThanOrEqual(150_000);
    expect(p95.ms).toBeLessThan(155_000);
    expect(p95.text).toMatch(/^2\.[56] min$/);
  });

  it("draws an empty chart and no wait for a queue with nothing started in the last hour", async () => {
    await enqueue("idle", null, { db: t.db, queue: "idle-q" });
    const { body } = await load();
    const { svg, bars } = chartOf(body, "idle-q");
    expect(bars).toEqual([]);
    expect(svg).toContain("<title>idle-q: 0 done, 0 failed in the last 60 minutes</title>");
    expect(waitCell(body, "idle-q", "p50")).toEqual({ text: "—", ms: null });
    expect(waitCell(body, "idle-q", "p95")).toEqual({ text: "—", ms: null });
    expect(body).toContain('<p class="legend">');
  });

  it("shares the bounded wait sample between queues (the latest of each first) and counts running jobs in it", async () => {
    const own = await backend.create();
    try {
      for (let i = 0; i < 5; i++) await enqueue("busy", null, { db: own.db, queue: "busy-q" });
      await enqueue("slow", null, { db: own.db, queue: "quiet-q" });
      for (let i = 0; i < 5; i++) await processOne({ busy: () => undefined }, { db: own.db, queue: "busy-q" });
      const release = deferred();
      const running = processOne({ slow: () => release.promise }, { db: own.db, queue: "quiet-q" });
      await waitFor("the quiet job to start", async () => (await own.sql("SELECT id FROM {jobs} WHERE status = 'running'")).length > 0);
      const activity = await recentActivity(own.db, 4);
      expect(activity.waits.get("quiet-q")?.sample).toBe(1);
      expect(activity.waits.get("busy-q")?.sample).toBe(3);
      expect(activity.nowMinute).toBe(minuteOf(await own.now()));
      release.resolve();
      await running;
    } finally {
      await own.close();
    }
  });

  it.runIf(backend.name === "mysql")("reads minutes in UTC whatever the session time zone of the application's MariaDB connection", async () => {
    const connection = await (t.db.executor.raw as import("mysql2/promise").Pool).getConnection();
    try {
      await connection.query("SET time_zone = '+05:30'");
      await enqueue("tz", null, { db: t.db, queue: "tz-q" });
      await processOne({ tz: () => undefined }, { db: t.db, queue: "tz-q" });
      const activity = await recentActivity(t.db.bind(connection));
      const now = minuteOf(await t.now());
      expect([now - 1, now]).toContain(activity.nowMinute);
      expect(activity.throughput.get("tz-q")?.done.reduce((a, b) => a + b, 0)).toBe(1);
    } finally {
      await connection.query("SET time_zone = '+00:00'");
      connection.release();
    }
  });
});
