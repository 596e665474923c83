import { writeFile } from "node:fs/promises";
import path from "node:path";
import { runWorker } from "@forge/jobs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHandlers, QUEUES } from "../src/handlers.js";
import { chromiumRunnable, launchChromium, screenshot } from "./dashboard-session.js";
import { createEnv, startApp, type Env, postgresOn } from "./support.js";

// The import page (issue 36.7): a 100,000-row CSV uploaded in a real browser, its progress bar
// fed by the job's Server-Sent Events (the worker's ctx.reportProgress, through the org-scoped
// /orgs/:org/jobs/:id/events), moving through values in between before it reads 100%.
const runnable = chromiumRunnable(postgresOn);
const ROWS = 100_000;

describe.runIf(runnable)("the import page in headless Chromium (postgres)", () => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  let browser: Browser;
  let page: Page;
  const stopWorker = new AbortController();
  let worker: Promise<void>;

  beforeAll(async () => {
    // No mail is sent here: an SMTP URL only so that the worker's handlers can be built.
    // Progress written and streamed every 0.1 s (PROGRESS_INTERVAL_SECONDS): an import that a
    // fast machine ends in two seconds still moves the bar through many values.
    env = await createEnv("postgres", { smtpUrl: "smtp://127.0.0.1:9", progressInterval: 0.1 });
    server = await startApp(env);
    worker = runWorker(createHandlers(env.config, env.db), {
      db: env.db.jobs,
      queue: QUEUES.imports,
      signal: stopWorker.signal,
      pollInterval: 0.2,
      progressInterval: env.config.progressInterval!,
    });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 900, height: 500 } });
  });
  afterAll(async () => {
    await browser?.close();
    stopWorker.abort();
    await worker;
    await server?.close();
    await env?.close();
  });

  it("shows a real progress bar for a 100,000-row import, then its report", async () => {
    const file = path.join(env.config.dataDir, "contacts-100k.csv");
    const lines = ["email,name,age"];
    for (let i = 1; i <= ROWS; i++) lines.push(`person${i}@example.org,Person ${i},${20 + (i % 60)}`);
    await writeFile(file, `${lines.join("\n")}\n`);

    await page.goto(`${server.url}/orgs/acme/imports/new`);
    await expect(page.title()).resolves.toBe("Import contacts");
    // Every value the bar takes, as the page sets it (no sampling gap).
    // (Strings: this package's TypeScript has no DOM types.)
    await page.evaluate(`(() => {
      const bar = document.getElementById("bar");
      const own = Object.getOwnPropertyDescriptor(HTMLProgressElement.prototype, "value");
      window.seen = [];
      Object.defineProperty(bar, "value", { get: () => own.get.call(bar), set: (v) => { own.set.call(bar, v); window.seen.push(v); } });
    })()`);
    await page.locator('input[type="file"]').setInputFiles(file);
    await page.locator('button[type="submit"]').click();

    // Part way: the bar between 10% and 90%, with its row count; that moment's picture.
    await page.waitForFunction('(v => v > 0.1 && v < 0.9)(document.getElementById("bar").value)', undefined, { timeout: 120_000, polling: 50 });
    expect(await page.locator("#status").textContent()).toMatch(/^Read [\d,]+ of about [\d,]+ rows$/);
    await screenshot(page, "import-progress-running");

    await page.locator("body[data-state]").waitFor({ timeout: 180_000 });
    expect(await page.locator("body").getAttribute("data-state")).toBe("done");
    expect(await page.locator("#status").textContent()).toBe("Imported 100,000 of 100,000 rows (0 rejected)");
    expect(await page.locator("#percent").textContent()).toBe("100%");
    await screenshot(page, "import-progress-done");

    const seen = (await page.evaluate("window.seen")) as number[];
    const between = [...new Set(seen.filter((v) => v > 0 && v < 1))];
    // Many steps, rising: a real bar, not a jump from 0 to done.
    expect(between.length).toBeGreaterThanOrEqual(5);
    expect(between).toEqual([...between].sort((a, b) => a - b));
    const { rows } = await env.db.sql.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${env.db.contacts} WHERE org = $1`, ["acme"]);
    expect(Number(rows[0]!.n)).toBe(ROWS);
  }, 300_000);
});
