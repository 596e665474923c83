// Development on a machine with nothing installed but Node (issue 34.2): `pnpm mail-catcher`
// gives the worker a mail server, and `pnpm dev` runs the web process, the worker and the
// catcher together on SQLite. Run as processes, as the scripts run them.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APP_DIR } from "../src/config.js";
import { freePort, waitFor } from "./support.js";

function start(entry: string, env: NodeJS.ProcessEnv) {
  const clean: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["DATABASE_URL", "DATABASE_SCHEMA", "DATA_DIR", "SMTP_URL", "PORT", "MAIL_CATCHER_PORT"]) delete clean[name];
  const child = spawn(process.execPath, ["--import", "tsx", entry], { cwd: APP_DIR, env: { ...clean, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) stream.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, exited, text: () => output };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "forge-sample-dev-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("pnpm dev: web, worker and mail catcher on SQLite, nothing else running", () => {
  it("a campaign sent to the web process is delivered by the worker to the catcher, which prints and stores each mail; SIGTERM stops all three", async () => {
    const data = path.join(dir, "dev");
    const dev = start("src/dev.ts", {
      DATABASE_URL: `sqlite:${path.join(data, "sample.db")}`,
      DATA_DIR: data,
      PORT: "0",
      MAIL_CATCHER_PORT: String(await freePort()),
    });
    try {
      const url = await waitFor("the web process listening", async () => /listening at (http:\/\/127\.0\.0\.1:\d+)/i.exec(dev.text())?.[1], 30_000);
      const sent = await fetch(`${url}/orgs/acme/campaigns/hello/send`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ subject: "Hello from dev", text: "Hi!", recipients: [{ email: "ada@example.org" }, { email: "bob@example.org" }] }),
      });
      expect(sent.status).toBe(202);
      await waitFor(
        "two mails printed by the catcher",
        async () => (dev.text().match(/\[mail-catcher\] mail \d+: .* "Hello from dev"/g) ?? []).length === 2,
        30_000,
      );
      expect(dev.text()).toMatch(/→ ada@example\.org {2}"Hello from dev"/);
      const stored = readdirSync(path.join(data, "mail")).filter((f) => f.endsWith(".eml"));
      expect(stored).toHaveLength(2);
      expect(readFileSync(path.join(data, "mail", stored[0]!), "utf8")).toContain("Subject: Hello from dev");
    } finally {
      dev.child.kill("SIGTERM");
    }
    expect(await dev.exited, dev.text().slice(-3000)).toBe(0);
    // both children said they stopped (one SIGTERM each: the worker finished, not "exiting now")
    expect(dev.text()).not.toContain("exiting now");
    expect(dev.text()).toMatch(/SIGTERM: closing/);
    expect(dev.text()).toMatch(/SIGTERM: finishing running jobs/);
  });
});

describe("pnpm mail-catcher", () => {
  it("listens on MAIL_CATCHER_PORT and says what to give the worker", async () => {
    const port = await freePort();
    const catcher = start("src/mail-catcher.ts", { MAIL_CATCHER_PORT: String(port), DATA_DIR: path.join(dir, "catcher") });
    try {
      await waitFor("the catcher's first line", async () => catcher.text().includes("mail catcher on"), 20_000);
      expect(catcher.text()).toContain(`run the worker with SMTP_URL=smtp://127.0.0.1:${port}`);
    } finally {
      catcher.child.kill("SIGTERM");
    }
    expect(await catcher.exited).toBe(0);
  });

  it("a port in use: exits 1 naming MAIL_CATCHER_PORT", async () => {
    const taken = createServer();
    const port = await new Promise<number>((resolve) => taken.listen(0, "127.0.0.1", () => resolve((taken.address() as { port: number }).port)));
    try {
      const catcher = start("src/mail-catcher.ts", { MAIL_CATCHER_PORT: String(port), DATA_DIR: path.join(dir, "catcher") });
      expect(await catcher.exited).toBe(1);
      expect(catcher.text()).toContain(`port ${port} is in use`);
      expect(catcher.text()).toContain("set MAIL_CATCHER_PORT to a free port");
    } finally {
      taken.close();
    }
  });

  it("a MAIL_CATCHER_PORT that is not a port: exits 1 saying so", async () => {
    const catcher = start("src/mail-catcher.ts", { MAIL_CATCHER_PORT: "smtp", DATA_DIR: path.join(dir, "catcher") });
    expect(await catcher.exited).toBe(1);
    expect(catcher.text()).toContain('MAIL_CATCHER_PORT must be a port number from 1 to 65535, got "smtp"');
  });
});
