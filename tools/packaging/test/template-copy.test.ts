// The template as a new user copies it out (issues 16.2, 34.1): the root README's "Start your own
// app" block, run line by line as written — `pnpm create-app` (copy, pack, wire to the
// tarballs), the install, the type check, the copy's tests, the demo on SQLite and on PostgreSQL.
// The only change to a line: `../my-app` becomes a temporary folder. Outside CI, when the npm
// registry does not answer (the other dependencies come from it), the test is skipped with a
// notice; in CI it always runs.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, run } from "../src/packages.js";

/** The tests the template has on SQLite alone: a floor, so an empty run cannot pass. */
const MIN_SQLITE_TESTS = 40;

/** What the README's block names the new app's folder; the test puts it in a temporary folder. */
const README_TARGET = "../my-app";

/** The sh block after the `template-steps` mark of the root README: the commands a user types. */
function templateSteps(readme: string): string[] {
  const mark = readme.indexOf("<!-- template-steps");
  if (mark < 0) throw new Error("README.md has no <!-- template-steps … --> mark above the template's commands");
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(mark))?.[1];
  if (!block) throw new Error("README.md: no ```sh block after the template-steps mark");
  return block
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"));
}

const steps = templateSteps(readFileSync(path.join(ROOT, "README.md"), "utf8"));

async function registryAnswers(): Promise<boolean> {
  try {
    await run("npm", ["ping"], { timeout: 15_000 });
    return true;
  } catch {
    return false;
  }
}

const inCi = process.env.CI === "true";
const online = inCi || (await registryAnswers());
if (!online) console.warn("packaging: the npm registry does not answer; the template-copy test is skipped (it always runs in CI)");

/** The backends this run has (the global setup leaves out a server that does not answer, outside CI). */
const backends = (process.env.FORGE_TEST_BACKENDS || "postgres,sqlite").split(",");
const postgresOn = backends.includes("postgres");

/**
 * A user's shell: nothing that ties a child to this monorepo (pnpm's NODE_PATH, which would find
 * the workspace's packages from anywhere, npm_* settings of the running script, the vitest
 * worker's variables, the test run's database URL) and no CI=true, under which pnpm refuses to
 * install without a lockfile (a new app has none). The run's backend choice is passed on, so the
 * copy's tests skip the same servers; the install reads pnpm's cached metadata first (the versions
 * are pinned, so this changes where they come from, not what is installed).
 */
function userEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(npm_|pnpm_|VITEST|NODE_PATH$|NODE_OPTIONS$|DATABASE_|FORGE_TEST_|TS_NODE|INIT_CWD$|CI$)/i.test(name)) continue;
    env[name] = value;
  }
  const passed = { FORGE_TEST_BACKENDS: backends.filter((b) => b !== "mysql").join(","), FORGE_TEST_PG_URL: process.env.FORGE_TEST_PG_URL };
  return { ...env, ...passed, npm_config_prefer_offline: "true" };
}

interface Ran {
  code: number | null;
  output: string;
}

function sh(line: string, cwd: string): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", line], { cwd, env: userEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    // Colours on (FORCE_COLOR from the test runner) or off, the checks read plain text.
    child.on("close", (code) => resolve({ code, output: stripVTControlCharacters(output) }));
  });
}

describe("the README's template steps", () => {
  it("start with pnpm create-app into ../my-app, go there, and install", () => {
    expect(steps[0]).toBe(`pnpm create-app ${README_TARGET}`);
    expect(steps[1]).toBe(`cd ${README_TARGET}`);
    expect(steps).toContain("pnpm install");
    // never a version from the registry: the packages are not published
    expect(steps.join("\n")).not.toMatch(/@forge\/[\w-]+@|npm pkg set|pnpm add/);
  });
});

describe.skipIf(!online)("the README's template steps, run as written", () => {
  let work: string;
  let app: string;
  let cwd = ROOT; // the README's block starts at the root of the clone
  const ran = new Map<string, Ran>();
  let failedStep: string | undefined;

  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), "forge-template-"));
    app = path.join(work, "my-app");
  });
  afterAll(() => (work ? rm(work, { recursive: true, force: true }) : undefined));

  /** Checks after a step, by its command. */
  const checks: Record<string, (result: Ran) => Promise<void>> = {
    [`pnpm create-app ${README_TARGET}`]: async (result) => {
      expect(result.output).toContain(`Created my-app in ${app}`);
      const manifest = await readFile(path.join(app, "package.json"), "utf8");
      const parsed = JSON.parse(manifest) as { name: string; dependencies: Record<string, string>; pnpm: { onlyBuiltDependencies: string[] } };
      expect(parsed.name).toBe("my-app");
      // nothing left that points into the monorepo
      expect(manifest).not.toContain("workspace:");
      expect(manifest).not.toMatch(/--workspace-root|--filter|turbo/);
      expect(await readFile(path.join(app, "tsconfig.json"), "utf8")).not.toContain("../");
      // the three packages from the copy's own vendor/ folder
      expect((await readdir(path.join(app, "vendor"))).sort()).toEqual(["forge-import-export-0.1.0.tgz", "forge-jobs-0.1.0.tgz", "forge-mail-0.1.0.tgz"]);
      for (const name of ["jobs", "mail", "import-export"]) expect(parsed.dependencies[`@forge/${name}`]).toBe(`file:vendor/forge-${name}-0.1.0.tgz`);
      // the pins reached the manifest (better-sqlite3 among them), and its native build is allowed
      expect(parsed.dependencies["better-sqlite3"]).toMatch(/^\d+\.\d+\.\d+$/);
      expect(parsed.pnpm.onlyBuiltDependencies).toContain("better-sqlite3");
      expect(existsSync(path.join(app, ".gitignore"))).toBe(true);
    },
    "pnpm install": async (result) => {
      // issue 34.3: no "approve-builds" box, no "pnpm.onlyBuiltDependencies … will not take effect"
      expect(result.output).not.toMatch(/onlyBuiltDependencies|approve-builds|Ignored build scripts/);
      for (const name of ["jobs", "mail", "import-export"]) {
        // the packed package, not a link back into the monorepo
        const manifest = JSON.parse(await readFile(path.join(app, "node_modules", "@forge", name, "package.json"), "utf8")) as { files?: string[] };
        expect(manifest.files).toContain("dist");
        expect(existsSync(path.join(app, "node_modules", "@forge", name, "src"))).toBe(false);
      }
      expect(await readFile(path.join(app, "pnpm-lock.yaml"), "utf8")).not.toContain(ROOT);
      // the bin is linked at install: the CLI works at once
      const version = await sh("pnpm exec forge-jobs --version", app);
      expect(version.code, version.output).toBe(0);
      expect(version.output.trim()).toMatch(/^\d+\.\d+\.\d+/);
    },
    "pnpm test": async (result) => {
      const summary = /^\s*Tests\s+(.*)$/m.exec(result.output)?.[1] ?? "";
      expect(summary, result.output.slice(-4000)).not.toMatch(/failed/);
      expect(Number(/(\d+) passed/.exec(summary)?.[1] ?? 0), summary).toBeGreaterThanOrEqual(MIN_SQLITE_TESTS);
      console.log(`packaging: the copy's pnpm test (FORGE_TEST_BACKENDS=${userEnv().FORGE_TEST_BACKENDS}): ${summary}`);
    },
    "pnpm demo": async (result) => {
      expect(result.output).toContain("mails delivered (counted by the SMTP catcher): 5 of 5");
      expect(result.output).toContain("import: 20 rows read, 16 imported, 4 rejected");
      expect(result.output).toMatch(/database {2}sqlite:/);
      expect(result.output.trim().endsWith("Demo OK.")).toBe(true);
    },
  };

  for (const step of steps) {
    const line = step.split(README_TARGET).join("<app>");
    const onPostgres = /^DATABASE_URL=postgres/.test(step);
    // Longest: with no prebuilt binary to download, the install compiles better-sqlite3 from source.
    it.skipIf(onPostgres && !postgresOn)(line, { timeout: 900_000 }, async () => {
      // A user stops at the first command that fails; so does the test.
      if (failedStep) throw new Error(`not run: the step before, ${failedStep}, failed`);
      failedStep = line;
      const command = step.split(README_TARGET).join(app);
      const cd = /^cd (\S+)$/.exec(command);
      if (cd) {
        cwd = path.resolve(cwd, cd[1]!);
        expect(existsSync(cwd)).toBe(true);
        failedStep = undefined;
        return;
      }
      const result = await sh(command, cwd);
      ran.set(step, result);
      expect(result.code, result.output.slice(-4000)).toBe(0);
      if (onPostgres) {
        expect(result.output).toContain("mails delivered (counted by the SMTP catcher): 5 of 5");
        expect(result.output).toMatch(/database {2}postgres:\/\/.*\(fresh schema demo_\w+\)/);
        expect(result.output.trim().endsWith("Demo OK.")).toBe(true);
      } else await checks[step]?.(result);
      failedStep = undefined;
    });
  }

  it("ran every step the checks know of", () => {
    expect([...ran.keys()]).toEqual(expect.arrayContaining(Object.keys(checks)));
  });
});
