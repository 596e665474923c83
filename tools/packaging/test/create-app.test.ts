// `pnpm create-app <folder>` refuses what it cannot do well before it writes anything: no
// folder, two folders, a folder with files in it, a file (issue 34.1). The whole route (copy,
// pack, install, tests, demo) is template-copy.test.ts.
import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appName } from "../src/template.js";

const PACKAGING_DIR = path.resolve(import.meta.dirname, "..");

/** As the root's script runs it: in tools/packaging, with the user's folder in INIT_CWD. */
async function createApp(args: string[], initCwd: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ["--import", "tsx", "src/create-app.ts", ...args], {
      cwd: PACKAGING_DIR,
      env: { ...process.env, INIT_CWD: initCwd },
    });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, output: e.stdout + e.stderr };
  }
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "forge-create-app-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("pnpm create-app: bad arguments", () => {
  it("no folder: exit 2 with the usage", async () => {
    const { code, output } = await createApp([], dir);
    expect(code).toBe(2);
    expect(output).toContain("create-app: name the folder to create.");
    expect(output).toContain("usage: pnpm create-app <folder>");
  });

  it("two folders: exit 2, naming them", async () => {
    const { code, output } = await createApp(["a", "b"], dir);
    expect(code).toBe(2);
    expect(output).toContain("expected one folder, got a b");
    expect(await readdir(dir)).toEqual([]);
  });

  it("a folder with files in it: exit 1, and its files untouched", async () => {
    const target = path.join(dir, "taken");
    await mkdir(target);
    await writeFile(path.join(target, "mine.txt"), "keep me");
    const { code, output } = await createApp(["taken"], dir); // relative to INIT_CWD
    expect(code).toBe(1);
    expect(output).toContain(`create-app: ${target} exists and is not empty: name a new folder for the app (nothing was written)`);
    expect(await readdir(target)).toEqual(["mine.txt"]);
  });

  it("a file: exit 1", async () => {
    await writeFile(path.join(dir, "a-file"), "");
    const { code, output } = await createApp(["a-file"], dir);
    expect(code).toBe(1);
    expect(output).toContain("a-file is a file: name a new folder for the app");
  });
});

describe("appName", () => {
  it("is the folder's name as npm allows it", () => {
    expect(appName("../my-app")).toBe("my-app");
    expect(appName("/tmp/My Shop!")).toBe("my-shop");
    expect(appName("/tmp/.hidden")).toBe("hidden");
  });
});
