import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorker, enqueue, getJob, getJobAttempts, listWorkers, processOne, prune, reclaim, retryJob, type JobContext } from "../../src/index.js";
import { createDashboard, type DashboardOptions } from "../../src/dashboard/index.js";
import { WorkerRegistry } from "../../src/worker/registry.js";
import { backends, deferred, type TestDatabase } from "../helpers/backends.js";
import { cli } from "../helpers/cli.js";

// The dashboard's operator parts, on the three backends: the workers view (lost workers and
// their jobs), a job's attempts, the search box and the selection's retry / cancel.

const BASE = "/ops";

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

async function load(s: Served, path: string, cookie = ""): Promise<{ status: number; body: string; cookie: string; csrf: string }> {
  const response = await fetch(`${s.origin}${path}`, { headers: cookie ? { cookie } : {} });
  const body = await response.text();
  const csrfCookie = /forge_jobs_csrf=[^;,]+/.exec(response.headers.get("set-cookie") ?? "")?.[0] ?? cookie;
  return { status: response.status, body, cookie: csrfCookie, csrf: /name="csrf" value="([^"]+)"/.exec(body)?.[1] ?? "" };
}

function post(s: Served, path: string, form: [string, string][], cookie: string) {
  return fetch(`${s.origin}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: new URLSearchParams(form).toString(),
  });
}

const listed = (body: string) => [...body.matchAll(/<tr id="job-(\d+)"/g)].map((m) => Number(m[1])).sort((a, b) => a - b);

describe.each(backends())("the dashboard's operator views ($name)", (backend) => {
  let t: TestDatabase;
  let s: Served;

  beforeAll(async () => {
    t = await backend.create();
    s = await serve({ db: t.db, basePath: BASE, listLimit: 50, refreshSeconds: 0 });
  });
  afterAll(async () => {
    await s.close();
    await t.close();
  });

  /** A job whose handler runs until `release`: resolves once it runs, with its worker id and lease end. */
  async function holding(queue: string, run: (handlers: Record<string, (p: unknown, ctx: JobContext) => Promise<unknown>>) => Promise<unknown>) {
    const id = await enqueue("hold", {}, { db: t.db, queue });
    const running = deferred();
    const release = deferred();
    const done = run({
      hold: async () => {
        running.resolve();
        await release.promise;
      },
    });
    await running.promise;
    const [row] = await t.sql<{ locked_by: string }>(`SELECT locked_by FROM {jobs} WHERE id = $1`, [id]);
    return { id, worker: row!.locked_by, release: () => release.resolve(), done };
  }

  it("workers: a running worker's row (host, queues, concurrency, heartbeat, jobs held), gone on a clean stop", async () => {
    const id = await enqueue("hold", {}, { db: t.db, queue: "w-a" });
    const running = deferred();
    const release = deferred();
    const hold = async () => {
      running.resolve();
      await release.promise;
    };
    const worker = createWorker({ hold }, { db: t.db, queue: ["w-a", "w-b"], concurrency: 3, lease: 600, workerId: `alive-${backend.name}` });
    const stopped = worker.run();
    await running.promise;
    const held = { id, release: () => release.resolve() };
    const workers = await listWorkers({ db: t.db });
    const me = workers.find((w) => w.id === `alive-${backend.name}`)!;
    expect(me).toMatchObject({ host: hostname(), pid: process.pid, queues: ["w-a", "w-b"], concurrency: 3, lease: 600, jobsHeld: 1, lost: false });
    expect(me.lastHeartbeatAt!.getTime()).toBeLessThanOrEqual((await t.now()).getTime());

    const page = await load(s, `${BASE}/workers`);
    expect(page.status).toBe(200);
    const row = new RegExp(`<tr data-worker="alive-${backend.name}" data-lost="false">.*?</tr>`).exec(page.body)![0];
    expect(row).toContain(hostname());
    expect(row).toContain("w-a, w-b");
    expect(row).toMatch(/data-count="held"><a [^>]*>1<\/a>/);
    expect(row).toContain("alive");
    // The overview says "running" for its job, and links the workers page.
    const overview = await load(s, BASE);
    expect(overview.body).toContain(`href="${BASE}/workers"`);
    expect(new RegExp(`<tr id="job-${held.id}"[^>]*><td[^>]*>.*?<td data-state>running</td>`).test(overview.body)).toBe(true);

    held.release();
    await worker.stop();
    await stopped;
    expect((await listWorkers({ db: t.db })).some((w) => w.id === `alive-${backend.name}`)).toBe(false);
  });

  it("workers: one silent past its lease is lost, and its job says when it will be reclaimed", async () => {
    const held = await holding("w-lost", (handlers) => processOne(handlers, { db: t.db, queue: "w-lost", lease: 600 }));
    // The worker that holds it registered, then fell silent an hour ago (its lease is 5 s).
    await new WorkerRegistry(t.db, { id: held.worker, queues: ["w-lost"], concurrency: 1, lease: 5 }).register((error) => {
      throw error;
    });
    await t.sql(`UPDATE ${t.tableName("jobs_workers")} SET heartbeat_at = ${t.db.sql.nowPlus("3600", "-")} WHERE id = $1`, [held.worker]);
    const job = await getJob(held.id, { db: t.db });
    const until = job!.status === "running" ? job!.lockedUntil.toISOString() : "";

    const me = (await listWorkers({ db: t.db })).find((w) => w.id === held.worker)!;
    expect(me).toMatchObject({ lost: true, jobsHeld: 1, lease: 5 });
    const page = await load(s, `${BASE}/workers`);
    expect(page.body).toContain(`<tr data-worker="${held.worker}" data-lost="true">`);
    expect(page.body).toContain("lost: silent past its 5s lease");

    const note = `worker lost, will be reclaimed at <time datetime="${until}">`;
    const overview = await load(s, BASE);
    expect(new RegExp(`<tr id="job-${held.id}".*?</tr>`).exec(overview.body)![0]).toContain(note);
    const list = await load(s, `${BASE}/jobs?queue=w-lost`);
    expect(new RegExp(`<tr id="job-${held.id}".*?</tr>`).exec(list.body)![0]).toContain(note);
    const jobPage = await load(s, `${BASE}/jobs/${held.id}`);
    expect(/<dd data-field="status">(.*?)<\/dd>/.exec(jobPage.body)![1]).toContain(note);

    held.release();
    await held.done;
    await t.sql(`DELETE FROM ${t.tableName("jobs_workers")} WHERE id = $1`, [held.worker]);
  });

  it("attempts: a first-attempt success records nothing apart; a failure retried, a reclaim and an operator's retry each keep the attempt that ended", async () => {
    const count = async (id: number) =>
      Number((await t.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM ${t.tableName("jobs_attempts")} WHERE job_id = $1`, [id]))[0]!.n);
    const due = (id: number) => t.sql(`UPDATE {jobs} SET run_at = ${t.db.sql.now} WHERE id = $1`, [id]);

    const plain = await enqueue("once", {}, { db: t.db, queue: "att" });
    expect(await processOne({ once: () => "ok" }, { db: t.db, queue: "att" })).toBe(true);
    expect(await count(plain)).toBe(0);
    const single = (await getJobAttempts(plain, { db: t.db }))!;
    expect(single).toHaveLength(1);
    expect(single[0]).toMatchObject({ attempt: 1, error: null, latest: true });
    expect(single[0]!.worker).toMatch(/./);
    expect(single[0]!.endedAt).not.toBeNull();

    // Attempt 1 fails (retried), attempt 2's worker is lost (reclaimed), attempt 3 fails for good,
    // then an operator retries it and attempt 4 succeeds.
    const id = await enqueue("flaky", {}, { db: t.db, queue: "att", maxAttempts: 3 });
    await processOne({ flaky: () => Promise.reject(new Error("boom one")) }, { db: t.db, queue: "att" });
    expect(await count(id)).toBe(1);
    await due(id);
    const second = deferred();
    const release = deferred();
    const running = processOne(
      {
        flaky: async () => {
          second.resolve();
          await release.promise;
        },
      },
      { db: t.db, queue: "att", lease: 600 },
    );
    await second.promise;
    expect(await reclaim({ db: t.db, lease: 0, queue: "att" })).toHaveLength(1);
    release.resolve();
    await running;
    expect(await count(id)).toBe(2);
    await due(id);
    await processOne({ flaky: () => Promise.reject(new Error("boom three")) }, { db: t.db, queue: "att" });
    expect((await getJob(id, { db: t.db }))!.status).toBe("failed");
    expect(await count(id)).toBe(2);
    expect(await retryJob(id, { db: t.db })).toBe(true);
    expect(await count(id)).toBe(3);
    expect(await processOne({ flaky: () => "fine" }, { db: t.db, queue: "att" })).toBe(true);

    const attempts = (await getJobAttempts(id, { db: t.db }))!;
    expect(attempts.map((a) => [a.attempt, a.latest])).toEqual([
      [1, false],
      [2, false],
      [3, false],
      [4, true],
    ]);
    expect(attempts[0]!.error).toContain("boom one");
    expect(attempts[1]!.error).toContain("worker lost without a verdict");
    expect(attempts[2]!.error).toContain("boom three");
    expect(attempts[3]!.error).toBeNull();
    for (const a of attempts) {
      expect(a.startedAt).not.toBeNull();
      expect(a.endedAt!.getTime()).toBeGreaterThanOrEqual(a.startedAt!.getTime());
      expect(a.worker).toMatch(/./);
    }

    const page = await load(s, `${BASE}/jobs/${id}`);
    const section = /<section id="attempts">.*?<\/section>/s.exec(page.body)![0];
    expect([...section.matchAll(/data-attempt="(\d+)"/g)].map((m) => Number(m[1]))).toEqual([1, 2, 3, 4]);
    expect(section).toContain("boom one");
    expect(section).toContain("worker lost without a verdict");
    expect(section).toContain('data-latest="true"');

    // Pruned with the job.
    expect(await prune({ db: t.db, olderThan: 0 })).toBeGreaterThanOrEqual(2);
    expect(await count(id)).toBe(0);
    expect(await getJobAttempts(id, { db: t.db })).toBeNull();
  });

  it("the registry's writes are upserts: a heartbeat refreshes the row and keeps its start, a new start writes it all; removal deletes it", async () => {
    const registry = new WorkerRegistry(t.db, { id: `beat-${backend.name}`, queues: ["beat"], concurrency: 2, lease: 30 });
    const fail = (error: unknown) => {
      throw error;
    };
    await registry.register(fail);
    const table = t.tableName("jobs_workers");
    await t.sql(`UPDATE ${table} SET heartbeat_at = ${t.db.sql.nowPlus("3600", "-")}, started_at = ${t.db.sql.nowPlus("7200", "-")} WHERE id = $1`, [
      `beat-${backend.name}`,
    ]);
    const before = (await listWorkers({ db: t.db })).find((w) => w.id === `beat-${backend.name}`)!;
    expect(before.lost).toBe(true);
    await registry.heartbeat();
    const after = (await listWorkers({ db: t.db })).find((w) => w.id === `beat-${backend.name}`)!;
    expect(after.lost).toBe(false);
    expect(after.lastHeartbeatAt!.getTime()).toBeGreaterThan(before.lastHeartbeatAt!.getTime());
    expect(after.startedAt).toEqual(before.startedAt);
    // The same id started again (a restarted process with a fixed workerId): the row written anew, its start now.
    await new WorkerRegistry(t.db, { id: `beat-${backend.name}`, queues: ["beat", "other"], concurrency: 5, lease: 60 }).register(fail);
    const restarted = (await listWorkers({ db: t.db })).find((w) => w.id === `beat-${backend.name}`)!;
    expect(restarted).toMatchObject({ queues: ["beat", "other"], concurrency: 5, lease: 60, lost: false });
    expect(restarted.startedAt!.getTime()).toBeGreaterThan(before.startedAt!.getTime());
    await registry.remove();
    expect((await listWorkers({ db: t.db })).some((w) => w.id === `beat-${backend.name}`)).toBe(false);
    // Removed, it writes no more: a late beat does not bring the row back.
    await registry.heartbeat();
    expect((await listWorkers({ db: t.db })).some((w) => w.id === `beat-${backend.name}`)).toBe(false);
  });

  it("forge-jobs show prints the attempts (attemptHistory)", async () => {
    const id = await enqueue("shown", {}, { db: t.db, queue: "show-att", maxAttempts: 2 });
    await processOne({ shown: () => Promise.reject(new Error("first try failed")) }, { db: t.db, queue: "show-att" });
    const result = await cli(["show", String(id), "--database-url", t.url, ...(t.schema ? ["--schema", t.schema] : [])]);
    expect(result.code).toBe(0);
    const shown = JSON.parse(result.stdout) as {
      id: number;
      attemptHistory: { attempt: number; error: string | null; worker: string | null; latest: boolean }[];
    };
    expect(shown.id).toBe(id);
    expect(shown.attemptHistory).toHaveLength(1);
    expect(shown.attemptHistory[0]).toMatchObject({ attempt: 1, latest: false });
    expect(shown.attemptHistory[0]!.error).toContain("first try failed");
  });

  it("search: by id, task, tenant, worker, error text and payload key; bad syntax says what to write", async () => {
    const a = await enqueue("search-mail", { email: "a@x.org", user: { id: 7, vip: true } }, { db: t.db, queue: "srch", tenant: "acme" });
    const b = await enqueue("search-mail", { email: "b@x.org", user: { id: 8, vip: false } }, { db: t.db, queue: "srch", tenant: "globex" });
    const c = await enqueue("search-export", { file: "100%_done.csv" }, { db: t.db, queue: "srch", tenant: "acme" });
    await processOne({ "search-mail": () => Promise.reject(new Error("SMTP Timeout after 30s")) }, { db: t.db, queue: "srch" });
    const q = async (text: string, extra = "") => {
      const page = await load(s, `${BASE}/jobs?queue=srch${extra}&q=${encodeURIComponent(text)}`);
      return { status: page.status, ids: listed(page.body), body: page.body };
    };
    expect((await q(String(b))).ids).toEqual([b]);
    expect((await q(`#${c}`)).ids).toEqual([c]);
    expect((await q("search-mail")).ids).toEqual([a, b]);
    expect((await q("task:search-export")).ids).toEqual([c]);
    expect((await q("acme")).ids).toEqual([a, c]);
    expect((await q("tenant:globex")).ids).toEqual([b]);
    // Error text, any case, from the ended job (history) as from live ones.
    expect((await q("timeout")).ids).toEqual([a]);
    expect((await q("error:SMTP timeout")).ids).toEqual([a]);
    expect((await q("payload.email=b@x.org")).ids).toEqual([b]);
    expect((await q("payload.user.id=7")).ids).toEqual([a]);
    expect((await q("payload.user.vip=false")).ids).toEqual([b]);
    expect((await q("payload.file=100%_done.csv")).ids).toEqual([c]);
    // LIKE's own characters are literal, and a quote is only text.
    expect((await q("error:%")).ids).toEqual([]);
    expect((await q("x' OR '1'='1")).ids).toEqual([]);
    const [worker] = await t.sql<{ locked_by: string }>(`SELECT locked_by FROM {all} WHERE id = $1`, [a]);
    expect((await q(`worker:${worker!.locked_by}`)).ids).toEqual([a]);
    // The search and the filters together; the box keeps its text.
    const both = await q("search-mail", "&status=pending");
    expect(both.ids).toEqual([b]);
    expect(both.body).toContain('name="q" type="search" value="search-mail"');

    const bad = await q("payload.email");
    expect(bad.status).toBe(400);
    expect(bad.ids).toEqual([]);
    expect(bad.body).toContain("a payload search is payload.&lt;key&gt;=&lt;value&gt;");
    expect((await q("payload.us er=1")).body).toContain("has characters other than letters, digits, _ and -");
    expect((await q("task:")).body).toContain("give a value after task:");
    expect((await q("99999999999999999999")).body).toContain("is not a job id");
  });

  it("selection: Retry selected / Cancel selected act on the ticked jobs and name the ones they left alone", async () => {
    const failedIds: number[] = [];
    for (const n of [1, 2]) {
      failedIds.push(await enqueue("sel", { n }, { db: t.db, queue: "sel" }));
      await processOne({ sel: () => Promise.reject(new Error(`sel ${n}`)) }, { db: t.db, queue: "sel" });
    }
    const pendingIds = [await enqueue("sel", { n: 3 }, { db: t.db, queue: "sel" }), await enqueue("sel", { n: 4 }, { db: t.db, queue: "sel" })];
    const list = await load(s, `${BASE}/jobs?queue=sel`);
    expect(list.body).toContain(`<form id="selection" class="actions" method="post" action="${BASE}/selected">`);
    expect(list.body).toContain(`<input type="checkbox" name="id" value="${pendingIds[0]}" form="selection"`);

    const retried = await post(
      s,
      `${BASE}/selected`,
      [
        ["csrf", list.csrf],
        ["back", "/jobs?queue=sel"],
        ["verb", "retry"],
        ...[...failedIds, pendingIds[0]!].map((id): [string, string] => ["id", String(id)]),
      ],
      list.cookie,
    );
    expect(retried.status).toBe(303);
    expect(retried.headers.get("location")).toBe(`${BASE}/jobs?queue=sel`);
    const flash = /forge_jobs_notice=[^;]+/.exec(retried.headers.get("set-cookie")!)![0];
    expect(flash).toBe(`forge_jobs_notice=selected-retried.2.3.${pendingIds[0]}`);
    for (const id of failedIds) expect((await getJob(id, { db: t.db }))!.status).toBe("pending");
    const after = await load(s, `${BASE}/jobs?queue=sel`, `${list.cookie}; ${flash}`);
    expect(after.body).toContain(`2 of 3 selected job(s) are back in their queues. Not retried: #${pendingIds[0]}`);

    const cancelled = await post(
      s,
      `${BASE}/selected`,
      [
        ["csrf", list.csrf],
        ["verb", "cancel"],
        ["id", String(pendingIds[1])],
        ["id", String(failedIds[0])],
      ],
      list.cookie,
    );
    expect(/forge_jobs_notice=([^;]+)/.exec(cancelled.headers.get("set-cookie")!)![1]).toBe("selected-cancelled.2.2");
    expect((await getJob(pendingIds[1]!, { db: t.db }))!.status).toBe("cancelled");

    // Nothing ticked, a forged form, a bad id, a bad verb: nothing changes.
    const none = await post(
      s,
      `${BASE}/selected`,
      [
        ["csrf", list.csrf],
        ["verb", "retry"],
      ],
      list.cookie,
    );
    expect(none.headers.get("set-cookie")).toContain("forge_jobs_notice=selected-none.0");
    expect(
      (
        await post(
          s,
          `${BASE}/selected`,
          [
            ["verb", "cancel"],
            ["id", String(pendingIds[0])],
          ],
          list.cookie,
        )
      ).status,
    ).toBe(403);
    const badId = await post(
      s,
      `${BASE}/selected`,
      [
        ["csrf", list.csrf],
        ["verb", "cancel"],
        ["id", "1; DROP TABLE jobs"],
      ],
      list.cookie,
    );
    expect(badId.status).toBe(400);
    expect(await badId.text()).toContain("id must be a job id");
    expect(
      (
        await post(
          s,
          `${BASE}/selected`,
          [
            ["csrf", list.csrf],
            ["verb", "delete"],
            ["id", String(pendingIds[0])],
          ],
          list.cookie,
        )
      ).status,
    ).toBe(400);
    expect((await getJob(pendingIds[0]!, { db: t.db }))!.status).toBe("pending");
  });

  it("on a schema before migration 17 (no jobs_workers, no jobs_attempts) the pages work and a worker runs without its row", async () => {
    const old = await backend.create();
    const served = await serve({ db: old.db, basePath: BASE, refreshSeconds: 0 });
    try {
      for (const table of ["jobs_workers", "jobs_attempts"]) await old.sql(`DROP TABLE ${old.tableName(table)}`);
      const errors: string[] = [];
      const running = deferred();
      const release = deferred();
      const id = await enqueue("old", {}, { db: old.db, queue: "old" });
      const worker = createWorker(
        {
          old: async () => {
            running.resolve();
            await release.promise;
          },
        },
        { db: old.db, queue: "old", events: { "worker:error": ({ during }) => void errors.push(during) } },
      );
      const stopped = worker.run();
      await running.promise;
      const workers = await load(served, `${BASE}/workers`);
      expect(workers.status).toBe(200);
      // Known from the job it holds only.
      expect(workers.body).toContain(`<tr data-worker="${worker.id}" data-lost="false">`);
      expect(workers.body).toContain("not registered");
      expect((await load(served, BASE)).status).toBe(200);
      const page = await load(served, `${BASE}/jobs/${id}`);
      expect(page.status).toBe(200);
      expect(page.body).toContain('data-attempt="1" data-latest="true"');
      release.resolve();
      await worker.stop();
      await stopped;
      expect(errors).toEqual([]);
      expect((await getJobAttempts(id, { db: old.db }))!.map((a) => a.attempt)).toEqual([1]);
    } finally {
      await served.close();
      await old.close();
    }
  });

  it("a tenant's dashboard has no workers page, and its selection leaves other tenants' jobs alone", async () => {
    const scoped = await serve({ db: t.db, basePath: BASE, tenant: "acme", refreshSeconds: 0 });
    try {
      expect((await load(scoped, `${BASE}/workers`)).status).toBe(404);
      const mine = await enqueue("sel-t", {}, { db: t.db, queue: "sel-t", tenant: "acme" });
      const theirs = await enqueue("sel-t", {}, { db: t.db, queue: "sel-t", tenant: "globex" });
      const list = await load(scoped, `${BASE}/jobs`);
      expect(list.body).not.toContain(`href="${BASE}/workers"`);
      const done = await post(
        scoped,
        `${BASE}/selected`,
        [
          ["csrf", list.csrf],
          ["verb", "cancel"],
          ["id", String(mine)],
          ["id", String(theirs)],
        ],
        list.cookie,
      );
      expect(/forge_jobs_notice=([^;]+)/.exec(done.headers.get("set-cookie")!)![1]).toBe(`selected-cancelled.1.2.${theirs}`);
      expect((await getJob(theirs, { db: t.db }))!.status).toBe("pending");
    } finally {
      await scoped.close();
    }
  });
});
