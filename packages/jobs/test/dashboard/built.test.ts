import { createServer } from "node:http";
import { existsSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backends, type TestDatabase } from "../helpers/backends.js";

const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../dist");
const require = createRequire(import.meta.url);

// The CommonJS build bundles each entry point on its own: the JobsDatabase class of
// index.cjs is not the one of dashboard.cjs. A database from connect() must still work.
describe.each(backends())("the built dashboard entry ($name)", (backend) => {
  let t: TestDatabase;
  beforeAll(async () => {
    if (!existsSync(path.join(DIST, "dashboard.cjs"))) throw new Error("packages/jobs/dist is missing: run `pnpm build` first");
    t = await backend.create();
  });
  afterAll(() => t?.close());

  it.each(["cjs", "js"])("dashboard.%s accepts a database from connect() of the same format", async (ext) => {
    // Literal paths inside this package, so the isolation rule can check them.
    const jobs = ext === "cjs" ? require("../../dist/index.cjs") : await import("../../dist/index.js");
    const dash = ext === "cjs" ? require("../../dist/dashboard.cjs") : await import("../../dist/dashboard.js");
    const db = jobs.connect(t.url, t.schema ? { schema: t.schema } : {});
    const handler = dash.createDashboard({ db, basePath: "/jobs" });
    const server = createServer((req, res) => handler(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      await jobs.enqueue("built-check", null, { db, queue: `built-${ext}` });
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/jobs`);
      expect(response.status).toBe(200);
      expect(await response.text()).toContain(`data-queue="built-${ext}"`);
    } finally {
      await new Promise((resolve) => server.close(resolve));
      await db.close();
    }
  });
});

describe("the dashboard entry's surface", () => {
  it("exports what an application mounts it with, and no rendering helper", async () => {
    // Literal path inside this package, so the isolation rule can check it.
    expect(Object.keys(await import("../../dist/dashboard.js"))).toEqual(["createDashboard"]);
  });
});
