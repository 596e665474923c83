import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { APP_DIR } from "../src/config.js";

// Screenshots of the signed-in dashboard, for CI: launch Debian's Chromium headless, sign in
// through the admin login form (never with a token in the URL), and write each picture under
// test-results/, printing its path in the test output. Copy this file with the sample.

/** Debian's chromium package; FORGE_TEST_CHROMIUM names another binary. */
export const CHROMIUM = process.env.FORGE_TEST_CHROMIUM ?? "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
/** Where screenshots go: CI keeps this folder as the run's artifacts. */
export const SCREENSHOTS_DIR = path.join(APP_DIR, "test-results");

/**
 * Whether the browser tests run: Chromium installed (in CI, CI=true, its absence is a failure,
 * not a skip). Elsewhere a missing Chromium skips them with one line saying what to install.
 */
export function chromiumRunnable(databaseOn: boolean): boolean {
  const runnable = databaseOn && (existsSync(CHROMIUM) || process.env.CI === "true");
  if (databaseOn && !runnable)
    console.warn(`forge tests: chromium is not installed at ${CHROMIUM}; the dashboard's browser tests are skipped (apt-get install -y chromium)`);
  return runnable;
}

/** Headless Chromium, as the tests launch it. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
}

/**
 * Signs `page` in to the sample's dashboard: the dashboard sends a browser without a session to
 * the login form, whose session cookie (HttpOnly, SameSite=Strict) lets it back. Resolves on
 * the dashboard, signed in.
 */
export async function signIn(page: Page, origin: string, token: string, dashboardPath = "/admin/jobs"): Promise<void> {
  await page.goto(`${origin}${dashboardPath}`);
  if (page.url() === `${origin}${dashboardPath}`) return;
  await page.locator('input[name="token"]').fill(token);
  await page.locator('button[type="submit"]').click();
  await page.waitForURL(`${origin}${dashboardPath}`);
}

/** A full-page screenshot as test-results/<name>.png; its path is printed and returned. */
export async function screenshot(page: Page, name: string): Promise<string> {
  if (!/^[a-z0-9-]+$/.test(name)) throw new TypeError(`screenshot: name must be lowercase letters, digits and -, got ${JSON.stringify(name)}`);
  const file = path.join(SCREENSHOTS_DIR, `${name}.png`);
  await mkdir(SCREENSHOTS_DIR, { recursive: true });
  await page.screenshot({ path: file, fullPage: true });
  console.log(`dashboard screenshot: ${file}`);
  return file;
}
