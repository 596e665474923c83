import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enqueue, processOne, schedule } from "../../src/index.js";
import { createDashboard } from "../../src/dashboard/index.js";
import { backends, uniqueName, type TestDatabase } from "../helpers/backends.js";

// Issue 16.13: a secret put in the query string by an app's own authentication was copied into
// every form action and redirect, so it reached the web logs of each action. The dashboard now
// drops any query string it does not read itself.

const BASE = "/admin/jobs";
const SECRET = "s3cret-7f1c";

describe.each(backends())("the dashboard never carries a query-string secret (issue 16.13) ($name)", (backend) => {
  let t: TestDatabase;
  let server: Server;
  let origin: string;
  let failed: number;
  let pending: number;
  const queue = uniqueName("nosecret");

  beforeAll(async () => {
    t = await backend.create();
    const dashboard = createDashboard({ db: t.db, basePath: BASE });
    server = createServer((req, res) => dashboard(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    failed = await enqueue("flaky", null, { db: t.db, queue });
    await processOne(
      {
        flaky: () => {
          throw Object.assign(new Error("down"), { retryable: false });
        },
      },
      { db: t.db, queue },
    );
    pending = await enqueue("later", null, { db: t.db, queue, availableIn: 3600 });
    await schedule("nightly", "0 3 * * *", { task: "later", queue, db: t.db });
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await t.close();
  });

  async function load(path: string): Promise<{ body: string; cookie: string; csrf: string }> {
    const response = await fetch(`${origin}${path}`);
    expect(response.status).toBe(200);
    const body = await response.text();
    return { body, cookie: (response.headers.get("set-cookie") ?? "").split(";")[0]!, csrf: /name="csrf" value="([^"]+)"/.exec(body)?.[1] ?? "" };
  }

  const targets = (body: string) => [...body.matchAll(/(?:action|href)="([^"]*)"/g)].map((m) => m[1]!);

  it("leaves it out of every form action and link of the overview, the job list, a job's page and a bulk confirmation", async () => {
    const overview = await load(`${BASE}?token=${SECRET}`);
    // The forms are there (one per job and per schedule action), and none names the secret.
    expect(overview.body).toContain(`action="${BASE}/jobs/${failed}/retry"`);
    expect(overview.body).toContain(`action="${BASE}/jobs/${pending}/cancel"`);
    expect(overview.body).toContain(`action="${BASE}/schedules/nightly/pause"`);
    for (const page of [
      overview,
      await load(`${BASE}/jobs?queue=${queue}&token=${SECRET}`),
      await load(`${BASE}/jobs/${failed}?token=${SECRET}`),
      await load(`${BASE}/bulk/retry?queue=${queue}&token=${SECRET}`),
    ]) {
      expect(targets(page.body).length).toBeGreaterThan(0);
      expect(targets(page.body).filter((target) => target.includes("token"))).toEqual([]);
      expect(page.body).not.toContain(SECRET);
    }
  });

  it("redirects an action back without it, whatever URL the form was posted to", async () => {
    const page = await load(BASE);
    const post = (path: string) =>
      fetch(`${origin}${path}`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", cookie: page.cookie },
        body: new URLSearchParams({ csrf: page.csrf }).toString(),
      });
    for (const path of [`${BASE}/jobs/${pending}/cancel?token=${SECRET}`, `${BASE}/schedules/nightly/pause?token=${SECRET}`]) {
      const response = await post(path);
      expect(response.status).toBe(303);
      expect(response.headers.get("location")).toBe(BASE);
    }
    expect((await t.sql<{ status: string }>("SELECT status FROM {all} WHERE id = $1", [pending]))[0]?.status).toBe("cancelled");
  });
});
