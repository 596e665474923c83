import { execFile } from "node:child_process";
import { mkdtemp, mkdir, rm, symlink, readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const pkgDir = fileURLToPath(new URL("..", import.meta.url));

/**
 * The package as published: `pnpm pack` → tarball → unpacked into a fresh node_modules, with
 * its dependencies (pg, croner) linked in. Only what `files` and `exports` ship can be loaded.
 */
describe("the packed @forge/jobs tarball", () => {
  let app: string;
  beforeAll(async () => {
    app = await mkdtemp(join(tmpdir(), "forge-pack-"));
    const { stdout } = await run("pnpm", ["pack", "--pack-destination", app], { cwd: pkgDir });
    const tarball = stdout.trim().split("\n").pop()!;
    const target = join(app, "node_modules", "@forge", "jobs");
    await mkdir(target, { recursive: true });
    await run("tar", ["-xzf", tarball, "-C", target, "--strip-components=1"]);
    const manifest = JSON.parse(await readFile(join(pkgDir, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    for (const dependency of Object.keys(manifest.dependencies)) {
      const found = dirname(createRequire(join(pkgDir, "package.json")).resolve(`${dependency}/package.json`));
      await symlink(found, join(app, "node_modules", dependency));
    }
  }, 120_000);
  afterAll(() => rm(app, { recursive: true, force: true }));

  const expected = [
    "enqueue",
    "enqueueMany",
    "processOne",
    "drain",
    "runWorker",
    "pendingCount",
    "getJob",
    "statusCounts",
    "heartbeat",
    "reclaim",
    "migrate",
    "connect",
    "JobError",
    "PRIORITY_LOW",
    "PRIORITY_NORMAL",
    "PRIORITY_HIGH",
    "TABLE_NAME",
  ];

  it("require('@forge/jobs') works from CommonJS", async () => {
    const { stdout } = await run(
      process.execPath,
      ["-e", "const j = require('@forge/jobs'); console.log(JSON.stringify(Object.keys(j)), j.TABLE_NAME, new j.JobError('x') instanceof Error)"],
      { cwd: app },
    );
    const [keys, table, isError] = stdout.trim().split(" ");
    expect(JSON.parse(keys!)).toEqual(expect.arrayContaining(expected));
    expect([table, isError]).toEqual(["jobs", "true"]);
  });

  it("import '@forge/jobs' works from ESM", async () => {
    const { stdout } = await run(
      process.execPath,
      ["--input-type=module", "-e", "import * as j from '@forge/jobs'; console.log(JSON.stringify(Object.keys(j)), j.PRIORITY_HIGH)"],
      { cwd: app },
    );
    const [keys, high] = stdout.trim().split(" ");
    expect(JSON.parse(keys!)).toEqual(expect.arrayContaining(expected));
    expect(high).toBe("10");
  });

  it("ships types for both, the CLI, the README, and no tests or sources", async () => {
    const manifest = JSON.parse(await readFile(join(app, "node_modules/@forge/jobs/package.json"), "utf8")) as {
      exports: Record<string, unknown>;
      bin: Record<string, string>;
    };
    expect(manifest.exports["."]).toEqual({
      import: { types: "./dist/index.d.ts", default: "./dist/index.js" },
      require: { types: "./dist/index.d.cts", default: "./dist/index.cjs" },
    });
    const { stdout } = await run("tar", ["-tzf", (await run("ls", [app])).stdout.split("\n").find((f) => f.endsWith(".tgz"))!], { cwd: app });
    const files = stdout.split("\n").filter(Boolean);
    expect(files).toEqual(
      expect.arrayContaining([
        "package/dist/index.d.ts",
        "package/dist/index.d.cts",
        "package/dist/cli.cjs",
        "package/bin/forge-jobs.cjs",
        "package/README.md",
        "package/LICENSE",
      ]),
    );
    // The CLI is CommonJS only (the bin requires it): no ESM build of it ships unused.
    expect(files.filter((f) => /^package\/dist\/cli\.(js|mjs)$/.test(f))).toEqual([]);
    expect(files.some((f) => f.includes("/test/") || f.includes("/src/"))).toBe(false);
    const help = await run(process.execPath, [join(app, "node_modules/@forge/jobs", manifest.bin["forge-jobs"]!), "--help"], { cwd: app });
    expect(help.stdout).toContain("Usage: forge-jobs");
  });
});

/**
 * `pnpm install` links bins before `pnpm build` makes dist/: the bin must be a committed file
 * (bin/forge-jobs.cjs), so `pnpm exec forge-jobs` works after the README's install and build.
 */
describe("the forge-jobs bin", () => {
  it("is a committed file outside dist/, and package.json points at it", async () => {
    const manifest = JSON.parse(await readFile(join(pkgDir, "package.json"), "utf8")) as { bin: Record<string, string>; files: string[] };
    const target = manifest.bin["forge-jobs"]!;
    expect(target.replace(/^\.\//, "")).not.toMatch(/^dist\//);
    const { stdout } = await run("git", ["ls-files", "--error-unmatch", target], { cwd: pkgDir });
    expect(stdout.trim()).toBe(target.replace(/^\.\//, ""));
    expect(manifest.files).toContain(target.replace(/^\.\//, "").split("/")[0]);
  });

  it("runs the built CLI, and without a build says to build", async () => {
    const bin = join(pkgDir, "bin", "forge-jobs.cjs");
    const version = await run(process.execPath, [bin, "--version"]);
    expect(version.stdout.trim()).toBe((JSON.parse(await readFile(join(pkgDir, "package.json"), "utf8")) as { version: string }).version);
    // A copy of the package with no dist/: what a fresh clone has between install and build.
    const copy = await mkdtemp(join(tmpdir(), "forge-bin-"));
    try {
      await mkdir(join(copy, "bin"));
      await writeFile(join(copy, "bin", "forge-jobs.cjs"), await readFile(bin));
      const missing = await run(process.execPath, [join(copy, "bin", "forge-jobs.cjs"), "--help"]).then(
        () => null,
        (error: { code: number; stderr: string }) => error,
      );
      expect(missing?.code).toBe(1);
      expect(missing?.stderr).toMatch(/dist\/cli\.cjs is missing: build @forge\/jobs first \(pnpm build\)/);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });
});
