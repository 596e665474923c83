import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, getJob, processOne, type JobContext } from "../../src/index.js";
import { createDashboard, type DashboardOptions } from "../../src/dashboard/index.js";
import { escapeHtml } from "../../src/dashboard/escape.js";
import { renderJob, shownEdges } from "../../src/dashboard/jobs-pages.js";
import { relatedJobs } from "../../src/dashboard/queries.js";
import { backends, type TestDatabase } from "../helpers/backends.js";

// The job list (filters, pages), a job's page, and bulk retry / cancel — on the three backends.

const BASE = "/ops/jobs";
const SCRIPT = "<script>alert(1)</script>";

interface Served {
  origin: string;
  close(): Promise<void>;
}

async function serve(options: DashboardOptions): Promise<Served> {
  const dashboard = createDashboard(options);
  const server: Server = createServer((req, res) => dashboard(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A page, its CSRF cookie and token. */
async function load(s: Served, path: string, cookie = ""): Promise<{ status: number; body: string; cookie: string; csrf: string; setCookie: string }> {
  const response = await fetch(`${s.origin}${path}`, { headers: cookie ? { cookie } : {} });
  const body = await response.text();
  const setCookie = response.headers.get("set-cookie") ?? "";
  const csrfCookie = /forge_jobs_csrf=[^;,]+/.exec(setCookie)?.[0] ?? cookie;
  return { status: response.status, body, cookie: csrfCookie, csrf: /name="csrf" value="([^"]+)"/.exec(body)?.[1] ?? "", setCookie };
}

function post(s: Served, path: string, form: Record<string, string>, cookie: string) {
  return fetch(`${s.origin}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: new URLSearchParams(form).toString(),
  });
}

const shownIds = (body: string) => [...body.matchAll(/<tr id="job-(\d+)"/g)].map((m) => Number(m[1]));

const failing = (message: string) => () => {
  throw new Error(message);
};

describe.each(backends())("the dashboard's job pages ($name)", (backend) => {
  let t: TestDatabase;
  let s: Served;

  beforeAll(async () => {
    t = await backend.create();
    s = await serve({ db: t.db, basePath: BASE, listLimit: 3, refreshSeconds: 0 });
  });
  afterAll(async () => {
    await s.close();
    await t.close();
  });

  /** Enqueues and fails one job per entry: [queue, task, tenant]. */
  async function failed(entries: [string, string, string | null][]): Promise<number[]> {
    const ids: number[] = [];
    for (const [queue, task, tenant] of entries) {
      const id = await enqueue(task, { n: ids.length }, { db: t.db, queue, ...(tenant ? { tenant } : {}) });
      await processOne({ [task]: failing(`boom ${id}`) }, { db: t.db, queue });
      ids.push(id);
    }
    return ids;
  }

  it("lists jobs by queue, status, task and tenant, a page at a time (Older → / Newest)", async () => {
    const a = await failed([
      ["list-a", "t1", "acme"],
      ["list-a", "t2", "acme"],
      ["list-a", "t1", "umbrella"],
      ["list-a", "t1", "acme"],
      ["list-a", "t1", "acme"],
    ]);
    const pendingId = await enqueue("t1", null, { db: t.db, queue: "list-a", tenant: "acme" });
    const other = await failed([["list-b", "t1", "acme"]]);

    const first = await load(s, `${BASE}/jobs?queue=list-a&status=failed&task=t1&tenant=acme`);
    expect(first.status).toBe(200);
    expect(shownIds(first.body)).toEqual([a[4], a[3], a[0]]);
    expect(first.body).not.toContain('data-page="next"');
    expect(first.body).toContain('value="list-a"');
    expect(first.body).toContain('<option value="failed" selected>');

    const all = await load(s, `${BASE}/jobs?queue=list-a`);
    expect(shownIds(all.body)).toEqual([pendingId, a[4], a[3]]);
    const next = /data-page="next" href="([^"]+)"/.exec(all.body)![1]!.replaceAll("&amp;", "&");
    expect(next).toBe(`${BASE}/jobs?queue=list-a&before=${a[3]}`);
    const second = await load(s, next);
    expect(shownIds(second.body)).toEqual([a[2], a[1], a[0]]);
    expect(second.body).toContain('data-page="first"');
    expect(shownIds(second.body)).not.toContain(other[0]);
    // The last error's first line in the list; the job's own page links from the id.
    expect(second.body).toContain(`boom ${a[0]}`);
    expect(second.body).toContain(`href="${BASE}/jobs/${a[0]}"`);
  });

  it("says what is wrong with a filter (400), and links each queue of the overview to its list", async () => {
    const bad = await load(s, `${BASE}/jobs?status=exploded`);
    expect(bad.status).toBe(400);
    expect(bad.body).toContain("status must be one of waiting, pending, running, done, failed, cancelled");
    expect((await load(s, `${BASE}/jobs?before=abc`)).status).toBe(400);
    await enqueue("x", null, { db: t.db, queue: "linked" });
    expect((await load(s, BASE)).body).toContain(`href="${BASE}/jobs?queue=linked"`);
  });

  it("shows one job whole: payload, progress, result, attempts, the last error with its stack, timings", async () => {
    const id = await enqueue("report", { org: "acme", note: SCRIPT }, { db: t.db, queue: "detail", maxAttempts: 3 });
    await processOne(
      {
        report: async (_p: unknown, ctx: JobContext) => {
          await ctx.checkpoint({ done: 2, total: 8 });
          throw new Error(`renderer crashed on ${SCRIPT}`);
        },
      },
      { db: t.db, queue: "detail" },
    );
    const page = await load(s, `${BASE}/jobs/${id}`);
    expect(page.status).toBe(200);
    const field = (name: string) => new RegExp(`<dd data-field="${name}">([\\s\\S]*?)</dd>`).exec(page.body)?.[1];
    expect(field("status")).toBe("pending");
    expect(field("attempts")).toBe("1 of 3");
    expect(field("queue")).toBe("detail");
    expect(field("started")).toContain("<time");
    expect(field("created")).toContain("<time");
    expect(page.body).toContain(escapeHtml(JSON.stringify({ org: "acme", note: SCRIPT }, null, 2)));
    expect(page.body).toContain('<progress value="2" max="8">');
    const lastError = /<section id="last-error">([\s\S]*?)<\/section>/.exec(page.body)![1]!;
    expect(lastError).toContain(escapeHtml(`renderer crashed on ${SCRIPT}`));
    expect(lastError).toMatch(/\n\s+at /); // the whole text, stack included
    expect(page.body).not.toContain(SCRIPT);
    expect(page.body).toContain(`action="${BASE}/jobs/${id}/cancel"`);

    const done = await enqueue("sum", { a: 1 }, { db: t.db, queue: "detail-done" });
    await processOne({ sum: () => ({ total: 42 }) }, { db: t.db, queue: "detail-done" });
    const donePage = await load(s, `${BASE}/jobs/${done}`);
    expect(/<section id="result">([\s\S]*?)<\/section>/.exec(donePage.body)![1]).toContain("&quot;total&quot;: 42");
    expect(donePage.body).toMatch(/data-field="finished"><time/);
    expect((await load(s, `${BASE}/jobs/999999999`)).status).toBe(404);
  });

  it("never shows the server's absolute paths: a stack's files are relative to the working directory, others cut to …/<file> (issue 16.13)", async () => {
    const id = await enqueue("leaky", null, { db: t.db, queue: "paths" });
    const stackFile = `${process.cwd()}/packages/jobs/src/handlers.ts`;
    await processOne(
      {
        leaky: () => {
          const error = new Error("ENOENT: no such file or directory, open '/etc/forge/secret.json' (for GET /orgs/acme)");
          error.stack = `${error.name}: ${error.message}\n    at read (${stackFile}:12:5)\n    at file://${process.cwd()}/node_modules/.pnpm/pg@8/node_modules/pg/lib/client.js:1:1\n    at run (/usr/lib/node/worker.js:3:9)`;
          throw error;
        },
      },
      { db: t.db, queue: "paths" },
    );
    const pages = [(await load(s, `${BASE}/jobs/${id}`)).body, (await load(s, BASE)).body, (await load(s, `${BASE}/jobs?queue=paths`)).body];
    for (const body of pages) {
      expect(body).not.toContain(process.cwd());
      expect(body).not.toContain("/etc/forge");
      expect(body).toContain("…/secret.json");
      expect(body).toContain("GET /orgs/acme");
    }
    const lastError = /<section id="last-error">([\s\S]*?)<\/section>/.exec(pages[0]!)![1]!;
    expect(lastError).toContain("at read (packages/jobs/src/handlers.ts:12:5)");
    expect(lastError).toContain("at node_modules/pg/lib/client.js:1:1");
    expect(lastError).toContain("at run (…/worker.js:3:9)");
  });

  it("a form on a job's page comes back to that page", async () => {
    const [id] = await failed([["back-q", "b", null]]);
    const page = await load(s, `${BASE}/jobs/${id}`);
    const response = await post(s, `${BASE}/jobs/${id}/retry`, { csrf: page.csrf, back: `/jobs/${id}` }, page.cookie);
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toBe(`${BASE}/jobs/${id}`);
    // Anywhere else is refused: back to the overview.
    const again = await post(s, `${BASE}/jobs/${id}/cancel`, { csrf: page.csrf, back: "//evil.example/x" }, page.cookie);
    expect(again.headers.get("location")).toBe(BASE);
  });

  it("a job's page lists its dependencies and dependents, each linked to its page, with task and state; a waiting job has a Cancel form", async () => {
    const queue = "edges";
    const a = await enqueue("fetch", null, { db: t.db, queue });
    const b = await enqueue(SCRIPT, null, { db: t.db, queue });
    const merge = await enqueue("merge", null, { db: t.db, queue, dependsOn: [a, b] });
    await processOne({ fetch: () => 1 }, { db: t.db, queue });
    const items = (body: string, id: string) => new RegExp(`<section id="${id}">([\\s\\S]*?)</section>`).exec(body)?.[1] ?? "";

    const served = (await load(s, `${BASE}/jobs/${merge}`)).body;
    expect(items(served, "depends-on")).toContain(`<a href="${BASE}/jobs/${a}">#${a}</a>`);
    expect(items(served, "depends-on")).toContain(`<a href="${BASE}/jobs/${b}">#${b}</a>`);
    expect(served).not.toContain('<section id="dependents">');
    // The served page reads each one's task and state (relatedJobs, inside the dashboard's tenant).
    expect(items(served, "depends-on")).toContain(`<li data-job="${a}" data-status="done"><a href="${BASE}/jobs/${a}">#${a}</a> fetch (done)</li>`);
    // Waiting jobs are a status of their own in the list's filter.
    expect((await load(s, `${BASE}/jobs?status=waiting&queue=${queue}`)).body).toContain(`data-job="${merge}" data-status="waiting"`);
    expect(items((await load(s, `${BASE}/jobs/${a}`)).body, "dependents")).toContain(`<a href="${BASE}/jobs/${merge}">#${merge}</a>`);
    expect((await load(s, `${BASE}/jobs/${(await failed([["edges-none", "x", null]]))[0]}`)).body).not.toContain('id="depends-on"');

    // A waiting job can be cancelled from its page, as cancelJob allows.
    const waiting = await load(s, `${BASE}/jobs/${merge}`);
    expect(waiting.body).toContain(`data-action="cancel" data-job="${merge}"`);
    expect((await post(s, `${BASE}/jobs/${merge}/cancel`, { csrf: waiting.csrf, back: `/jobs/${merge}` }, waiting.cookie)).status).toBe(303);
    expect((await getJob(merge, { db: t.db }))?.status).toBe("cancelled");

    // The states come from relatedJobs, which the page handler passes as `related`.
    const job = (await getJob(merge, { db: t.db }))!;
    const page = renderJob({ title: "t", basePath: BASE, csrfToken: "c", job, now: new Date(), related: await relatedJobs(t.db, shownEdges(job)) });
    expect(items(page, "depends-on")).toContain(`<li data-job="${a}" data-status="done"><a href="${BASE}/jobs/${a}">#${a}</a> fetch (done)</li>`);
    expect(items(page, "depends-on")).toContain(
      `<li data-job="${b}" data-status="pending"><a href="${BASE}/jobs/${b}">#${b}</a> ${escapeHtml(SCRIPT)} (pending)</li>`,
    );
    // Outside the dashboard's tenant: listed by id, its task and state not read.
    expect(await relatedJobs(t.db, [a, b], "acme")).toEqual(new Map());
  });

  it("shows the last error of a job waiting for its retry, in the pending list", async () => {
    const id = await enqueue("flaky", null, { db: t.db, queue: "waiting-retry", maxAttempts: 3 });
    await processOne({ flaky: failing("smtp 421 try later") }, { db: t.db, queue: "waiting-retry" });
    expect((await getJob(id, { db: t.db }))?.status).toBe("pending");
    const own = await serve({ db: t.db, basePath: BASE, refreshSeconds: 0 });
    try {
      const body = (await load(own, BASE)).body;
      const pending = /<section id="pending">([\s\S]*?)<\/section>/.exec(body)![1]!;
      const row = new RegExp(`<tr id="job-${id}"[\\s\\S]*?</tr>`).exec(pending)![0];
      expect(row).toContain("Error: smtp 421 try later");
      expect(row).not.toMatch(/\n\s+at /);
    } finally {
      await own.close();
    }
  });

  it("bulk retry: counts, asks, and retries only the jobs of the filter (CSRF-checked)", async () => {
    const mine = await failed([
      ["bulk-a", "mail", null],
      ["bulk-a", "mail", null],
      ["bulk-a", "other", null],
    ]);
    const theirs = await failed([["bulk-b", "mail", null]]);

    const confirm = await load(s, `${BASE}/bulk/retry?queue=bulk-a&task=mail`);
    expect(confirm.status).toBe(200);
    expect(confirm.body).toContain('data-count="2"');
    expect(confirm.body).toContain("Retry <strong>2</strong> job(s) matching queue bulk-a, status failed, task mail?");
    expect(confirm.body).toContain(`action="${BASE}/bulk/retry"`);
    // Nothing happened yet, and a forged post (no token) changes nothing.
    expect((await getJob(mine[0]!, { db: t.db }))?.status).toBe("failed");
    const forged = await post(s, `${BASE}/bulk/retry`, { queue: "bulk-a", task: "mail" }, confirm.cookie);
    expect(forged.status).toBe(403);
    expect((await getJob(mine[0]!, { db: t.db }))?.status).toBe("failed");

    const form = Object.fromEntries([...confirm.body.matchAll(/<input type="hidden" name="(\w+)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!]));
    expect(form).toMatchObject({ queue: "bulk-a", status: "failed", task: "mail" });
    const done = await post(s, `${BASE}/bulk/retry`, form, confirm.cookie);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe(`${BASE}/jobs?queue=bulk-a&status=failed&task=mail`);
    expect(done.headers.get("set-cookie")).toContain("forge_jobs_notice=bulk-retried.2.2");
    const status = async (id: number) => (await getJob(id, { db: t.db }))?.status;
    expect(await status(mine[0]!)).toBe("pending");
    expect(await status(mine[1]!)).toBe("pending");
    expect(await status(mine[2]!)).toBe("failed");
    expect(await status(theirs[0]!)).toBe("failed");

    const flash = /forge_jobs_notice=[^;]+/.exec(done.headers.get("set-cookie")!)![0];
    const after = await load(s, done.headers.get("location")!, `${confirm.cookie}; ${flash}`);
    expect(after.body).toContain("2 of 2 matching job(s) are back in their queues.");

    const none = await load(s, `${BASE}/bulk/retry?queue=bulk-a&task=mail`);
    expect(none.body).toContain('data-count="0"');
    expect(none.body).not.toContain('data-confirm="retry"');
  });

  it("bulk cancel: the pending jobs of the filter, with the count in the notice", async () => {
    const ids = [
      await enqueue("c", null, { db: t.db, queue: "cancel-many", availableIn: 3600 }),
      await enqueue("c", null, { db: t.db, queue: "cancel-many", availableIn: 3600 }),
    ];
    const kept = await enqueue("c", null, { db: t.db, queue: "cancel-keep", availableIn: 3600 });
    const confirm = await load(s, `${BASE}/bulk/cancel?queue=cancel-many`);
    expect(confirm.body).toContain("Cancel <strong>2</strong> job(s) matching queue cancel-many, status pending?");
    const done = await post(s, `${BASE}/bulk/cancel`, { csrf: confirm.csrf, queue: "cancel-many", status: "pending" }, confirm.cookie);
    expect(done.headers.get("set-cookie")).toContain("forge_jobs_notice=bulk-cancelled.2.2");
    for (const id of ids) expect((await getJob(id, { db: t.db }))?.status).toBe("cancelled");
    expect((await getJob(kept, { db: t.db }))?.status).toBe("pending");
  });

  it("a tenant-scoped dashboard never shows or touches another tenant's job, whatever the filter says", async () => {
    const scoped = await serve({ db: t.db, basePath: BASE, tenant: "acme", refreshSeconds: 0 });
    try {
      const [acme, umbrella] = await failed([
        ["scoped", "s", "acme"],
        ["scoped", "s", "umbrella"],
      ]);
      const waiting = await enqueue("s", null, { db: t.db, queue: "scoped-pending", tenant: "umbrella" });

      expect(shownIds((await load(scoped, `${BASE}/jobs?queue=scoped`)).body)).toEqual([acme]);
      expect(shownIds((await load(scoped, `${BASE}/jobs?queue=scoped&tenant=umbrella`)).body)).toEqual([]);
      expect(shownIds((await load(scoped, `${BASE}/jobs?tenant=umbrella`)).body)).toEqual([]);
      expect((await load(scoped, `${BASE}/jobs/${umbrella}`)).status).toBe(404);
      expect((await load(scoped, `${BASE}/jobs/${acme}`)).status).toBe(200);
      const overview = (await load(scoped, BASE)).body;
      expect(shownIds(overview)).not.toContain(umbrella);
      expect(shownIds(overview)).not.toContain(waiting);
      expect(overview).not.toContain('data-queue="scoped-pending"');

      const confirm = await load(scoped, `${BASE}/bulk/retry?queue=scoped&tenant=umbrella`);
      expect(confirm.body).toContain('data-count="0"');
      const page = await load(scoped, `${BASE}/jobs/${acme}`);
      await post(scoped, `${BASE}/bulk/retry`, { csrf: page.csrf, queue: "scoped", tenant: "umbrella" }, page.cookie);
      await post(scoped, `${BASE}/jobs/${umbrella}/retry`, { csrf: page.csrf }, page.cookie);
      expect((await getJob(umbrella!, { db: t.db }))?.status).toBe("failed");
      const all = await post(scoped, `${BASE}/bulk/retry`, { csrf: page.csrf, queue: "scoped" }, page.cookie);
      expect(all.headers.get("set-cookie")).toContain("bulk-retried.1.1");
      expect((await getJob(acme!, { db: t.db }))?.status).toBe("pending");
      expect((await getJob(umbrella!, { db: t.db }))?.status).toBe("failed");
    } finally {
      await scoped.close();
    }
  });
});
