// The CLI as a new user meets it (issue 16.4, 16.11): DATABASE_URL from the .env of the folder
// it runs in, and a TypeScript handlers module loaded through the app's own tsx, with no
// `node --import tsx` in front (pnpm links the bin as a shell script, which Node cannot import).
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, enqueue, getJob, migrate } from "../src/index.js";
import { waitFor } from "./helpers/backends.js";
import { runCli as cli } from "./helpers/cli.js";

const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "forge-cli-env-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("forge-jobs: DATABASE_URL from ./.env (issue 16.11)", () => {
  it("reads it when the environment has none, and creates the SQLite file's folder", async () => {
    const app = join(dir, "app");
    await rm(app, { recursive: true, force: true });
    await mkdir(app);
    await writeFile(join(app, ".env"), "# the app's settings\nSMTP_URL=smtp://x\nexport DATABASE_URL='sqlite:data/app.db'  \n");
    const result = await cli(["migrate"], { cwd: app, env: { DATABASE_URL: undefined } });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(existsSync(join(app, "data", "app.db"))).toBe(true);
    expect(existsSync(join(app, "forge-jobs.db"))).toBe(false);
  });

  it("the environment and --database-url come first", async () => {
    const app = join(dir, "first");
    await mkdir(app);
    await writeFile(join(app, ".env"), "DATABASE_URL=sqlite:from-env-file.db\n");
    expect((await cli(["migrate"], { cwd: app, env: { DATABASE_URL: "sqlite:from-environment.db" } })).code).toBe(0);
    expect((await cli(["migrate", "--database-url", "sqlite:from-flag.db"], { cwd: app, env: { DATABASE_URL: undefined } })).code).toBe(0);
    expect(["from-env-file.db", "from-environment.db", "from-flag.db"].map((f) => existsSync(join(app, f)))).toEqual([false, true, true]);
  });
});

describe("forge-jobs: a TypeScript handlers module (issue 16.4)", () => {
  const TS_HANDLERS = `import type { } from "node:fs";
interface Doubling { n: number }
const handlers = { "ts.double": async (payload: Doubling): Promise<number> => payload.n * 2 };
export default handlers;
`;
  let url: string;
  let handlersFile: string;
  beforeAll(async () => {
    handlersFile = join(dir, "handlers.ts");
    await writeFile(handlersFile, TS_HANDLERS);
    url = `sqlite:${join(dir, "ts.db")}`;
    const db = connect(url);
    await migrate({ db });
    await db.close();
  });

  it("worker runs it through the app's tsx, found from the working directory", async () => {
    const db = connect(url);
    try {
      const id = await enqueue("ts.double", { n: 21 }, { db });
      let child: ChildProcess | undefined;
      const run = cli(["worker", handlersFile, "--database-url", url, "--poll", "0.05"], { cwd: PACKAGE_DIR, onStart: (c) => (child = c) });
      const job = await waitFor(
        "the job done",
        async () => {
          const j = await getJob(id, { db });
          return j?.status === "done" ? j : undefined;
        },
        30_000,
      );
      child!.kill("SIGTERM");
      const result = await run;
      expect(job.result).toBe(42);
      expect(result.stderr).toContain("tasks: ts.double");
      expect(result.code).toBe(0);
    } finally {
      await db.close();
    }
  });

  it("doctor --handlers takes it too, and names a task it lacks", async () => {
    const db = connect(url);
    await enqueue("ts.triple", { n: 1 }, { db });
    await db.close();
    const result = await cli(["doctor", "--handlers", handlersFile, "--database-url", url], { cwd: PACKAGE_DIR });
    expect(result.stderr).toBe("forge-jobs doctor: 1 problem(s) found\n");
    expect(result.stdout).toMatch(/PROBLEM queued tasks without a handler in .*handlers\.ts: ts\.triple \(1\)/);
    expect(result.code).toBe(1);
  });

  it("without tsx (and a Node that cannot strip types) says what to install", async () => {
    const lonely = await mkdtemp(join(tmpdir(), "forge-no-tsx-"));
    try {
      await writeFile(join(lonely, "handlers.ts"), TS_HANDLERS);
      // NODE_PATH (set by pnpm for scripts) would find the repository's tsx from anywhere.
      const result = await cli(["doctor", "--handlers", "handlers.ts", "--database-url", url], { cwd: lonely, env: { NODE_PATH: "" } });
      if ((process.features as { typescript?: unknown }).typescript) {
        expect(result.stdout).toContain("PROBLEM queued tasks without a handler");
      } else {
        expect(result.stderr).toContain("handlers.ts is TypeScript and tsx is not installed: add it to your app (npm install -D tsx, or pnpm add -D tsx)");
        expect(result.code).toBe(2);
      }
    } finally {
      await rm(lonely, { recursive: true, force: true });
    }
  });
});
