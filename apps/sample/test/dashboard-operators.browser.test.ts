import { createWorker, enqueue, getJob, processOne, type JobContext } from "@forge/jobs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumRunnable, launchChromium, screenshot, signIn } from "./dashboard-session.js";
import { createEnv, startApp, type Env, postgresOn } from "./support.js";

// The dashboard's operator parts in headless Chromium: the workers page (a lost worker and its
// job), a job's attempts, the search box, and Retry selected. Each step leaves a screenshot
// under test-results/ (its path printed). PostgreSQL, like the other browser test.

const TOKEN = "browser-operators-token";
const runnable = chromiumRunnable(postgresOn);

/** Resolves once, for a handler to hold its job until the test lets it go. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe.runIf(runnable)("the dashboard's operator parts in headless Chromium (postgres)", () => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  let browser: Browser;
  let page: Page;
  const dashboard = () => `${server.url}/admin/jobs`;

  beforeAll(async () => {
    env = await createEnv("postgres", { adminToken: TOKEN });
    server = await startApp(env);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await signIn(page, server.url, TOKEN);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await env?.close();
  });

  const db = () => env.db.jobs;
  const workersTable = () => (db().schema ? `"${db().schema}"."jobs_workers"` : `"jobs_workers"`);

  it("workers: a live worker with the job it holds, and a lost one whose job will be reclaimed", async () => {
    // A live worker holding one report.
    const running = gate();
    const release = gate();
    const hold = async () => {
      running.open();
      await release.opened;
    };
    const live = await enqueue("browser:report", { n: 1 }, { db: db(), queue: "reports" });
    const worker = createWorker({ "browser:report": hold }, { db: db(), queue: ["reports", "exports"], concurrency: 4, lease: 600, workerId: "web-1:4242" });
    const stopped = worker.run();
    await running.opened;

    // And one that stopped sending heartbeats an hour ago, still holding an export.
    const started = gate();
    const orphan = await enqueue("browser:export", { n: 2 }, { db: db(), queue: "exports" });
    const orphanRun = processOne(
      {
        "browser:export": async (_payload: unknown, _ctx: JobContext) => {
          started.open();
          await release.opened;
        },
      },
      { db: db(), queue: "exports", lease: 600 },
    );
    await started.opened;
    const { rows } = await env.db.sql.query<{ locked_by: string; locked_until: Date }>(`SELECT locked_by, locked_until FROM ${db().table} WHERE id = $1`, [
      orphan,
    ]);
    const lostId = rows[0]!.locked_by;
    await env.db.sql.query(
      `INSERT INTO ${workersTable()} (id, host, pid, queues, concurrency, lease_seconds, started_at, heartbeat_at)
       VALUES ($1, 'web-2', 777, '["exports"]', 2, 30, now() - interval '2 hours', now() - interval '1 hour')`,
      [lostId],
    );

    await page.goto(`${dashboard()}/workers`);
    const alive = page.locator('tr[data-worker="web-1:4242"]');
    expect(await alive.getAttribute("data-lost")).toBe("false");
    expect(await alive.locator("td").nth(2).textContent()).toBe("reports, exports");
    expect(await alive.locator('td[data-count="held"]').textContent()).toBe("1");
    const lost = page.locator(`tr[data-worker="${lostId}"]`);
    expect(await lost.getAttribute("data-lost")).toBe("true");
    await expect(lost.locator("td[data-state]").textContent()).resolves.toBe("lost: silent past its 30s lease");
    await screenshot(page, "dashboard-workers");

    // The overview: the live worker's job is running, the lost one's says when it comes back.
    await page.goto(dashboard());
    await expect(page.locator(`#running tr#job-${live} td[data-state]`).textContent()).resolves.toBe("running");
    const note = page.locator(`#running tr#job-${orphan} td[data-state] [data-lost]`);
    await expect(note.textContent()).resolves.toMatch(/^worker lost, will be reclaimed at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$/);
    expect(await note.locator("time").getAttribute("datetime")).toBe(rows[0]!.locked_until.toISOString());
    await page.goto(`${dashboard()}/jobs/${orphan}`);
    await expect(page.locator('dd[data-field="status"]').textContent()).resolves.toContain("worker lost, will be reclaimed at");
    await screenshot(page, "dashboard-lost-worker-job");

    release.open();
    await worker.stop();
    await stopped;
    await orphanRun;
    await page.goto(`${dashboard()}/workers`);
    expect(await page.locator('tr[data-worker="web-1:4242"]').count()).toBe(0);
  });

  it("a job's attempts: each one's start, end, worker and error", async () => {
    const id = await enqueue("browser:flaky", { to: "flaky@example.org" }, { db: db(), queue: "flaky", maxAttempts: 3 });
    await processOne({ "browser:flaky": () => Promise.reject(new Error("421 try again later")) }, { db: db(), queue: "flaky" });
    await env.db.sql.query(`UPDATE ${db().table} SET run_at = now() WHERE id = $1`, [id]);
    expect(await processOne({ "browser:flaky": () => "sent" }, { db: db(), queue: "flaky" })).toBe(true);
    expect((await getJob(id, { db: db() }))?.status).toBe("done");

    await page.goto(`${dashboard()}/jobs/${id}`);
    const rows = page.locator("#attempts tbody tr");
    expect(await rows.count()).toBe(2);
    await expect(rows.nth(0).locator("pre.err").textContent()).resolves.toContain("421 try again later");
    expect(await rows.nth(1).getAttribute("data-latest")).toBe("true");
    for (const row of await rows.all()) expect(await row.locator("time").count()).toBe(2);
    await screenshot(page, "dashboard-job-attempts");
  });

  it("search and Retry selected: the failed mails of one address, ticked and put back", async () => {
    const fail = () => Promise.reject(Object.assign(new Error("550 mailbox unavailable"), { retryable: false }));
    const ids: number[] = [];
    for (const to of ["x@example.org", "y@example.org", "x@example.org"]) {
      ids.push(await enqueue("browser:mail", { to }, { db: db(), queue: "outbox" }));
      await processOne({ "browser:mail": fail }, { db: db(), queue: "outbox" });
    }

    await page.goto(`${dashboard()}/jobs?queue=outbox`);
    await page.locator('input[name="q"]').fill("payload.to=x@example.org");
    await page.locator('form.filters button[type="submit"]').click();
    await page.waitForURL(/q=payload.to/);
    const shown = await page.locator("#jobs tbody tr").evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute("data-job"))));
    expect(shown.sort()).toEqual([ids[0], ids[2]].sort());
    await screenshot(page, "dashboard-search");

    for (const id of shown) await page.locator(`input[type="checkbox"][value="${id}"]`).check();
    await page.locator('button[data-selected="retry"]').click();
    await page.locator(".notice", { hasText: "2 of 2 selected job(s) are back in their queues." }).waitFor();
    expect(page.url()).toContain("q=payload.to");
    for (const id of shown) expect((await getJob(id, { db: db() }))?.status).toBe("pending");
    expect((await getJob(ids[1]!, { db: db() }))?.status).toBe("failed");
    await screenshot(page, "dashboard-retry-selected");

    // A search that cannot be read says what to write.
    await page.locator('input[name="q"]').fill("payload.to");
    await page.locator('form.filters button[type="submit"]').click();
    await expect(page.locator("[data-search-error]").textContent()).resolves.toContain("payload.<key>=<value>");
  });
});
