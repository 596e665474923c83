// The template as a new user meets it (issue 16.1, 16.4, 16.11): `pnpm start` and `pnpm worker`
// on a fresh clone (no data folder yet), the app and the forge-jobs CLI on one database by
// default (the app's .env), and the CLI's doctor taking the app's own handlers module.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseEnv } from "node:util";
import { connect, enqueue, listLimits } from "@forge/jobs";
import { MAIL_JOB_TASK, messageToPayload } from "@forge/mail";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APP_DIR, appEnvironment, loadConfig } from "../src/config.js";
import { openDatabase } from "../src/db.js";
import { migrateApp } from "../src/migrate.js";
import handlersForCli, { createHandlers, TASKS } from "../src/handlers.js";
import { waitFor } from "./support.js";

/** What `pnpm exec forge-jobs` runs from apps/sample: the bin the package manager linked. */
const CLI = path.join(APP_DIR, "node_modules", ".bin", "forge-jobs");

function run(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
  const output: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) stream.on("data", (chunk: Buffer) => output.push(chunk.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output, exited, text: () => output.join("") };
}

/** The environment without the test run's own DATABASE_URL (and the variables that would change the app). */
function cleanEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ["DATABASE_URL", "DATABASE_SCHEMA", "DATA_DIR", "SMTP_URL", "PORT"]) delete env[name];
  return { ...env, ...extra };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "forge-sample-fresh-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("a fresh clone: no data folder yet (issue 16.1)", () => {
  let child: ChildProcess | undefined;
  afterAll(() => void child?.kill("SIGKILL"));

  it("pnpm start (src/server.ts) creates it, and answers", async () => {
    const data = path.join(dir, "start", "not", "yet");
    const server = run(process.execPath, ["--import", "tsx", "src/server.ts"], {
      cwd: APP_DIR,
      env: cleanEnv({ DATABASE_URL: `sqlite:${path.join(data, "sample.db")}`, DATA_DIR: data, PORT: "0" }),
    });
    child = server.child;
    const url = await waitFor("the server listening", async () => /listening at (http:\/\/127\.0\.0\.1:\d+)/i.exec(server.text())?.[1], 30_000);
    expect((await fetch(`${url}/health`)).status).toBe(200);
    expect(existsSync(path.join(data, "sample.db"))).toBe(true);
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  });

  it("pnpm worker (src/worker.ts) creates it, starts (its mail limit declared) and stops on SIGTERM", async () => {
    const data = path.join(dir, "worker", "not", "yet");
    const url = `sqlite:${path.join(data, "sample.db")}`;
    const worker = run(process.execPath, ["--import", "tsx", "src/worker.ts"], {
      cwd: APP_DIR,
      env: cleanEnv({ DATABASE_URL: url, DATA_DIR: data, SMTP_URL: "smtp://127.0.0.1:9" }),
    });
    child = worker.child;
    await waitFor(
      "the worker's mail limit in the database",
      async () => {
        if (!existsSync(path.join(data, "sample.db"))) return false;
        const db = connect(url);
        try {
          return (await listLimits({ db })).some((l) => l.key === "smtp:default");
        } catch {
          return false; // still migrating
        } finally {
          await db.close();
        }
      },
      30_000,
    );
    worker.child.kill("SIGTERM");
    expect(await worker.exited).toBe(0);
  });
});

describe("one database for the app and the CLI: the app's .env (issue 16.11)", () => {
  const envFile = path.join(APP_DIR, ".env");
  const fromFile = parseEnv(readFileSync(envFile, "utf8")).DATABASE_URL!;

  it("the committed .env names the SQLite file, and the app's configuration reads it", () => {
    expect(fromFile).toMatch(/^sqlite:(?!\/)/);
    expect(loadConfig(appEnvironment({})).databaseUrl).toBe(`sqlite:${path.resolve(APP_DIR, fromFile.slice("sqlite:".length))}`);
    // the environment wins over the file
    expect(appEnvironment({ DATABASE_URL: "sqlite::memory:" }).DATABASE_URL).toBe("sqlite::memory:");
  });

  it("the CLI, run where that .env is, opens the same relative file", async () => {
    const app = path.join(dir, "cli-app");
    await mkdir(app);
    await copyFile(envFile, path.join(app, ".env"));
    const migrate = run(CLI, ["migrate"], { cwd: app, env: cleanEnv({}) });
    expect(await migrate.exited, migrate.text()).toBe(0);
    expect(existsSync(path.resolve(app, fromFile.slice("sqlite:".length)))).toBe(true);
  });
});

describe("forge-jobs doctor --handlers src/handlers.ts (issue 16.4)", () => {
  it("the CLI's handlers object serves exactly the worker's tasks", async () => {
    const url = `sqlite:${path.join(dir, "tasks.db")}`;
    const db = openDatabase({ databaseUrl: url, databaseSchema: undefined });
    try {
      const handlers = createHandlers({ dataDir: dir, smtpUrl: "smtp://127.0.0.1:9", mailFrom: "a@example.org", mailProvider: "default" }, db);
      expect(Object.keys(handlersForCli).sort()).toEqual(Object.keys(handlers).sort());
      expect([...TASKS].sort()).toEqual(Object.keys(handlers).sort());
    } finally {
      await db.close();
    }
  });

  it("takes the app's TypeScript handlers module from apps/sample and names a task it lacks", async () => {
    const url = `sqlite:${path.join(dir, "doctor.db")}`;
    const db = openDatabase({ databaseUrl: url, databaseSchema: undefined });
    try {
      await migrateApp(db);
      await enqueue(MAIL_JOB_TASK, messageToPayload({ from: "a@example.org", to: [{ name: "", address: "b@example.org" }], subject: "s", text: "t" }), {
        db: db.jobs,
        queue: "mails",
      });
      const ok = run(CLI, ["doctor", "--handlers", "src/handlers.ts", "--database-url", url], { cwd: APP_DIR, env: cleanEnv({}) });
      expect(await ok.exited, ok.text()).toBe(0);
      expect(ok.text()).toContain("ok      every queued task has a handler (1 task name(s) queued)");
      await enqueue("not.in.the.app", {}, { db: db.jobs });
      const bad = run(CLI, ["doctor", "--handlers", "src/handlers.ts", "--database-url", url], { cwd: APP_DIR, env: cleanEnv({}) });
      expect(await bad.exited).toBe(1);
      expect(bad.text()).toContain("PROBLEM queued tasks without a handler in src/handlers.ts: not.in.the.app (1)");
    } finally {
      await db.close();
    }
  });
});
