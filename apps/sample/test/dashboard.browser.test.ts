import { getJob, processOne, setLimit, type JobContext } from "@forge/jobs";
import { IMPORT_JOB_TASK } from "@forge/import-export";
import { MAIL_JOB_TASK } from "@forge/mail";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumRunnable, launchChromium, screenshot } from "./dashboard-session.js";
import { createEnv, startApp, type Env, postgresOn } from "./support.js";

const TOKEN = "browser-test-token";

// In CI (CI=true), .ci/run installs Chromium: its absence there is a failure, not a skip
// (dashboard-session.ts). The sign-in is spelled out below, as the login form is under test here.
const runnable = chromiumRunnable(postgresOn);

describe.runIf(runnable)("the dashboard in headless Chromium (postgres)", () => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    env = await createEnv("postgres", { adminToken: TOKEN });
    server = await startApp(env);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await env?.close();
  });

  const count = (queue: string, state: string) => page.locator(`tr[data-queue="${queue}"] td[data-count="${state}"]`).textContent();

  async function send(campaign: string, emails: string[]): Promise<number[]> {
    const response = await fetch(`${server.url}/orgs/acme/campaigns/${campaign}/send`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ subject: `Campaign ${campaign}`, text: "Hi", recipients: emails.map((email) => ({ email })) }),
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { jobIds: number[] }).jobIds;
  }

  it("shows the counts change, a failure, and puts the failed job back with its Retry button", async () => {
    // Signing in: the dashboard sends the browser to the login form, whose cookie lets it back.
    await page.goto(`${server.url}/admin/jobs`);
    expect(page.url()).toBe(`${server.url}/admin/login`);
    await page.locator('input[name="token"]').fill(TOKEN);
    await page.locator('button[type="submit"]').click();
    await page.waitForURL(`${server.url}/admin/jobs`);
    await expect(page.title()).resolves.toBe("Forge sample — jobs");
    expect(await page.locator("text=No jobs yet.").count()).toBe(1);

    // Jobs enqueued through the API appear on reload.
    const ids = await send("spring", ["a@example.org", "b@example.org", "c@example.org"]);
    await page.reload();
    expect(await count("mails", "pending")).toBe("3");
    expect(await count("mails", "ready")).toBe("3");
    expect(await count("mails", "failed")).toBe("0");

    // One mail fails for good: the handler throws a non-retryable error.
    const failing = {
      [MAIL_JOB_TASK]: () => {
        throw Object.assign(new Error("554 <a@example.org>: relay access denied"), { retryable: false });
      },
    };
    expect(await processOne(failing, { queue: "mails", db: env.db.jobs })).toBe(true);
    const failed = (await Promise.all(ids.map((id) => getJob(id, { db: env.db.jobs })))).find((j) => j?.status === "failed")!;
    expect(failed).toBeDefined();
    await page.reload();
    expect(await count("mails", "pending")).toBe("2");
    expect(await count("mails", "failed")).toBe("1");
    const row = page.locator(`#failures tr#job-${failed.id}`);
    await expect(row.locator("pre.err").textContent()).resolves.toContain("relay access denied");

    // Retry, in the page: a POST form with its CSRF token, 303 back to the page.
    await row.locator('button[data-action="retry"]').click();
    await page.locator(".notice", { hasText: `Job #${failed.id} is back in its queue.` }).waitFor();
    expect(page.url()).toBe(`${server.url}/admin/jobs`);
    expect(await count("mails", "failed")).toBe("0");
    expect(await count("mails", "pending")).toBe("3");
    expect(await page.locator(`#pending tr#job-${failed.id}`).count()).toBe(1);
    expect((await getJob(failed.id, { db: env.db.jobs }))?.status).toBe("pending");

    // Cancel a pending one the same way.
    const other = ids.find((id) => id !== failed.id)!;
    await page.locator(`#pending tr#job-${other} button[data-action="cancel"]`).click();
    await page.locator(".notice", { hasText: `Job #${other} was cancelled.` }).waitFor();
    expect((await getJob(other, { db: env.db.jobs }))?.status).toBe("cancelled");
    expect(await count("mails", "pending")).toBe("2");

    // A running import shows its progress bar (read / estimatedTotal from its checkpoint).
    const upload = new FormData();
    upload.append("file", new Blob(["email,name\nx@example.org,X\n"]), "c.csv");
    const imported = (await (await fetch(`${server.url}/orgs/acme/imports`, { method: "POST", body: upload })).json()) as { jobId: number };
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let saved!: () => void;
    const checkpointed = new Promise<void>((resolve) => (saved = resolve));
    const slowImport = {
      [IMPORT_JOB_TASK]: async (_payload: unknown, ctx: JobContext) => {
        await ctx.checkpoint({ read: 120, estimatedTotal: 400, imported: 118, rejected: 2 });
        saved();
        await released;
        return { read: 400 };
      },
    };
    const running = processOne(slowImport, { queue: "imports", db: env.db.jobs });
    await checkpointed;
    // And one more failure, and the last mail sent, for the picture.
    await processOne(failing, { queue: "mails", db: env.db.jobs });
    expect(await processOne({ [MAIL_JOB_TASK]: () => undefined }, { queue: "mails", db: env.db.jobs })).toBe(true);
    await page.reload();
    const bar = page.locator(`#running tr#job-${imported.jobId} progress`);
    expect([await bar.getAttribute("value"), await bar.getAttribute("max")]).toEqual(["120", "400"]);
    await expect(page.locator(`#running tr#job-${imported.jobId} .pct`).textContent()).resolves.toBe("30%");
    expect(await count("imports", "running")).toBe("1");

    // The last hour's chart of the mails queue, drawn from those jobs: one sent, one failed
    // for good (the retried one is pending again, the cancelled one is not charted).
    const chart = page.locator('figure[data-queue="mails"] svg.chart');
    expect(await chart.isVisible()).toBe(true);
    const bars = chart.locator("g.bar");
    const counted = await bars.evaluateAll((groups) =>
      groups.map((g) => ({
        done: Number(g.getAttribute("data-done")),
        failed: Number(g.getAttribute("data-failed")),
        title: g.querySelector("title")?.textContent ?? "",
      })),
    );
    expect(counted.reduce((n, b) => n + b.done, 0)).toBe(1);
    expect(counted.reduce((n, b) => n + b.failed, 0)).toBe(1);
    for (const b of counted) expect(b.title).toMatch(new RegExp(`^\\d\\d:\\d\\d UTC: ${b.done} done, ${b.failed} failed$`));
    // Laid out by the browser: the bars have a height on screen.
    const heights = await Promise.all((await chart.locator("g.bar rect").all()).map(async (rect) => (await rect.boundingBox())?.height ?? 0));
    expect(heights.length).toBeGreaterThanOrEqual(2);
    expect(Math.max(...heights)).toBeGreaterThan(0);
    for (const height of heights) expect(height).toBeGreaterThan(0);
    // The wait before start, p50 and p95, next to the queue's counts.
    await expect(page.locator('tr[data-queue="mails"] td[data-wait="p50"]').textContent()).resolves.toMatch(/^\d+(\.\d)? (ms|s|min|h)$/);
    await expect(page.locator('tr[data-queue="mails"] td[data-wait="p95"]').textContent()).resolves.toMatch(/^\d+(\.\d)? (ms|s|min|h)$/);
    expect(await page.locator('figure[data-queue="imports"] svg.chart').isVisible()).toBe(true);

    // Flow control: a limit stored from the API shows in the Limits panel, with its running and throttled jobs.
    await setLimit("browser:smtp", { concurrency: 2, rate: { limit: 14, perSeconds: 1, burst: 20 } }, { db: env.db.jobs });
    await page.reload();
    const limit = page.locator('#limits tr[data-limit="browser:smtp"]');
    expect(await limit.isVisible()).toBe(true);
    expect(await limit.locator('td[data-count="running"]').textContent()).toBe("0");
    expect(await limit.locator('td[data-count="throttled"]').textContent()).toBe("0");
    expect(await limit.locator("td[data-limit-concurrency]").textContent()).toBe("2");
    expect(await limit.locator("td[data-limit-rate]").textContent()).toBe("14 / 1 s (burst 20)");

    await screenshot(page, "dashboard");
    release();
    expect(await running).toBe(true);
  });

  it("a page without a session is sent to sign in, and a form posted from elsewhere is refused", async () => {
    const anonymous = await browser.newPage();
    try {
      await anonymous.goto(`${server.url}/admin/jobs`);
      expect(anonymous.url()).toBe(`${server.url}/admin/login`);
    } finally {
      await anonymous.close();
    }
    // A page of another site posts to the dashboard: no session goes with it (the cookie is
    // SameSite=Strict, and this page has none), and the CSRF token is a guess.
    const forger = await browser.newPage();
    try {
      await forger.setContent(`<form method="post" action="${server.url}/admin/jobs/jobs/1/retry"><input name="csrf" value="guess"><button>go</button></form>`);
      const [response] = await Promise.all([forger.waitForEvent("response"), forger.click("button")]);
      expect([401, 403]).toContain(response.status());
    } finally {
      await forger.close();
    }
  });
});
