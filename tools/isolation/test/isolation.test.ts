import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { checkIsolation, scanIsolation, type Form } from "../src/check.js";
import { DEFAULT_PACKAGES_DIR, formatViolation, runCli } from "../src/cli.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = path.join(here, "fixtures");
const toolDir = path.resolve(here, "..");
const repoPackages = path.resolve(toolDir, "../../packages");
const fixturePackages = (name: string): string => path.join(fixtures, name, "packages");

/** Violations of a fixture as [file relative to its packages dir, line, column, form, specifier]. */
function found(packagesDir: string): [string, number, number, Form, string][] {
  return checkIsolation({ packagesDir }).map((v) => [path.relative(packagesDir, v.file).split(path.sep).join("/"), v.line, v.column, v.form, v.specifier]);
}

const tmpDirs: string[] = [];
function tmpPackages(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "isolation-"));
  tmpDirs.push(dir);
  return path.join(dir, "packages");
}
function write(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}
afterEach(() => {
  for (const dir of tmpDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

// fixture, file in package a, line, column, form, specifier
const cases: [string, string, number, number, Form, string][] = [
  ["static-import", "src/index.ts", 3, 25, "import", "@forge/b"],
  ["import-type", "src/index.ts", 3, 26, "import-type", "@forge/b"],
  ["side-effect-import", "src/setup.mts", 3, 8, "import-side-effect", "@forge/b"],
  ["export-from", "src/index.ts", 3, 25, "export-from", "@forge/b"],
  ["export-star", "src/index.ts", 3, 15, "export-star", "@forge/b"],
  ["export-star-as", "src/index.ts", 3, 20, "export-star", "@forge/b"],
  ["export-type", "src/index.cts", 3, 26, "export-type", "@forge/b"],
  ["dynamic-import", "src/view.tsx", 3, 34, "dynamic-import", "@forge/b"],
  ["dynamic-import-non-literal", "src/index.ts", 3, 46, "dynamic-import", "name"],
  ["dynamic-import-template", "src/index.ts", 3, 46, "dynamic-import", "`@forge/${name}`"],
  ["dynamic-import-allow-no-reason", "src/index.ts", 3, 46, "dynamic-import", "name"],
  ["dynamic-import-allow-forge", "src/index.ts", 3, 46, "dynamic-import", "`@forge/${name}`"],
  ["require-allow-comment", "src/index.cjs", 3, 34, "require", "name"],
  ["require", "src/index.cjs", 3, 29, "require", "@forge/b"],
  ["require-non-literal", "src/index.cjs", 3, 32, "require", "name"],
  ["require-resolve", "src/index.cjs", 3, 31, "require-resolve", "@forge/b"],
  ["import-meta-resolve", "src/index.mjs", 3, 42, "import-meta-resolve", "@forge/b"],
  ["import-equals", "src/index.ts", 3, 20, "import-equals", "@forge/b"],
  ["import-type-node", "src/index.ts", 3, 26, "import-type-node", "@forge/b"],
  ["declare-module", "src/augment.d.ts", 3, 16, "declare-module", "@forge/b"],
  ["reference-path", "src/index.ts", 3, 22, "reference-path", "../../b/src/index.ts"],
  ["reference-types", "src/index.ts", 3, 23, "reference-types", "@forge/b"],
  ["relative-path", "src/index.ts", 3, 25, "import", "../../b/src/index.js"],
  ["subpath", "src/index.ts", 3, 25, "import", "@forge/b/internal"],
  ["jsdoc-import-type", "src/index.js", 3, 19, "jsdoc-import", "@forge/b"],
  ["jsdoc-import-tag", "src/index.js", 3, 26, "jsdoc-import", "@forge/b"],
  // (audit 12.18) a module name in any string of code, and code in a string that loads one
  ["create-require", "src/index.mjs", 3, 52, "module-name", "@forge/b"],
  ["main-module-require", "src/index.cjs", 3, 48, "module-name", "@forge/b"],
  ["module-name-template", "src/index.ts", 3, 56, "module-name", "@forge/b/internal"],
  ["new-function-import", "src/index.ts", 3, 34, "code-string", "@forge/b"],
  ["eval-require", "src/index.cjs", 3, 16, "code-string", "@forge/b/internal"],
  ["dependencies", "package.json", 8, 5, "dependencies", "@forge/b"],
  ["dev-dependencies", "package.json", 8, 5, "devDependencies", "@forge/b"],
  ["peer-dependencies", "package.json", 8, 5, "peerDependencies", "@forge/b"],
  ["optional-dependencies", "package.json", 8, 5, "optionalDependencies", "@forge/b"],
  ["dependency-alias", "package.json", 8, 5, "dependencies", "npm:@forge/b@^0.1.0"],
  ["dependency-file-path", "package.json", 8, 5, "dependencies", "file:../b"],
];

describe("checkIsolation on one fixture per form", () => {
  it("has a test case for every fixture folder", () => {
    // cycles/ and floors/ hold the fixtures of the cycle and floor checks (cycles.test.ts, floors.test.ts)
    const folders = fs.readdirSync(fixtures).filter((name) => name !== "clean" && name !== "cycles" && name !== "floors");
    expect(folders.sort()).toEqual(cases.map(([fixture]) => fixture).sort());
  });

  it.each(cases)("%s: reports a/%s:%i:%i as %s %s", (fixture, file, line, column, form, specifier) => {
    expect(found(fixturePackages(fixture))).toEqual([[`a/${file}`, line, column, form, specifier]]);
  });

  it("says why: another package, a path leaving the package, or a specifier it cannot check", () => {
    const [other] = checkIsolation({ packagesDir: fixturePackages("static-import") });
    expect(other?.message).toContain("another package (@forge/b)");
    const [relative] = checkIsolation({ packagesDir: fixturePackages("relative-path") });
    expect(relative?.message).toBe("leaves package @forge/a (resolves to ../b/src/index.js)");
    const [dynamic] = checkIsolation({ packagesDir: fixturePackages("dynamic-import-non-literal") });
    expect(dynamic?.message).toContain("cannot be checked");
    const [code] = checkIsolation({ packagesDir: fixturePackages("new-function-import") });
    expect(code?.message).toBe(`code in a string loads it: ${other?.message}`);
  });
});

describe("what is allowed", () => {
  it("passes the clean fixture: builtins, third-party, own files, own name, strings and comments", () => {
    const report = scanIsolation({ packagesDir: fixturePackages("clean") });
    expect(report.violations.map((v) => formatViolation(v))).toEqual([]);
    expect(report.packages.map((p) => p.name)).toEqual(["@forge/a", "@forge/b"]);
    // every extension is parsed (.ts .tsx .d.ts .cjs .mjs .js), test/fixtures is not
    expect(report.files).toBe(11);
  });

  it("skips node_modules, dist and test/fixtures, and reports a symlink leaving the package", () => {
    const packagesDir = tmpPackages();
    fs.cpSync(fixturePackages("clean"), packagesDir, { recursive: true });
    const bad = 'import { enqueue } from "@forge/b";\n';
    write(path.join(packagesDir, "a/node_modules/@forge/b/index.ts"), bad);
    write(path.join(packagesDir, "a/dist/index.js"), bad);
    write(path.join(packagesDir, "a/src/test/fixtures/bad.ts"), bad);
    expect(checkIsolation({ packagesDir })).toEqual([]);

    fs.symlinkSync(path.join(packagesDir, "b/src"), path.join(packagesDir, "a/src/b"));
    fs.symlinkSync("./util.ts", path.join(packagesDir, "a/src/alias.ts"));
    expect(found(packagesDir)).toEqual([["a/src/b", 1, 1, "symlink", path.join(packagesDir, "b/src")]]);
  });

  it("reports an unreadable package.json instead of skipping the package", () => {
    const packagesDir = tmpPackages();
    write(path.join(packagesDir, "a/package.json"), '{ "name": "@forge/a", }');
    expect(found(packagesDir)).toEqual([["a/package.json", 1, 1, "package.json", "package.json"]]);
  });

  it("does not take a package whose name merely starts like its own for itself", () => {
    const packagesDir = tmpPackages();
    write(path.join(packagesDir, "a/package.json"), '{ "name": "@forge/a" }\n');
    write(path.join(packagesDir, "a/src/index.ts"), 'export * from "@forge/a-utils";\n');
    expect(found(packagesDir)).toEqual([["a/src/index.ts", 1, 15, "export-star", "@forge/a-utils"]]);
  });
});

describe("the CLI", () => {
  it("defaults to the repo's packages/", () => {
    expect(DEFAULT_PACKAGES_DIR).toBe(repoPackages);
  });

  it("prints file:line:col  form  specifier  message and returns 1 on a violation", () => {
    const lines: string[] = [];
    const code = runCli(
      [fixturePackages("static-import")],
      (text) => lines.push(text),
      () => {},
    );
    expect(code).toBe(1);
    const file = path.relative(process.cwd(), path.join(fixturePackages("static-import"), "a/src/index.ts"));
    expect(lines).toEqual([
      `${file}:3:25  import  @forge/b  references another package (@forge/b); ${"packages must not depend on each other, share the structural protocol instead"}\n`,
    ]);
  });

  it("runs as a script and exits 0 with a summary when clean", () => {
    const tsx = path.join(toolDir, "node_modules/.bin/tsx");
    const result = spawnSync(tsx, ["src/cli.ts", fixturePackages("clean")], { cwd: toolDir, encoding: "utf8" });
    expect(result.stdout).toBe("isolation: 2 packages, 11 files, no cross-package reference\n");
    expect(result.status).toBe(0);
  });
});

describe("the rule on the real packages/", () => {
  it("finds no cross-package reference in the repository's packages/", () => {
    const report = scanIsolation({ packagesDir: repoPackages });
    expect(report.packages.map((p) => p.name)).toEqual(expect.arrayContaining(["@forge/jobs", "@forge/mail", "@forge/import-export"]));
    expect(report.violations.map((v) => formatViolation(v, path.resolve(repoPackages, "..")))).toEqual([]);
  });

  it("would fail if packages/mail imported @forge/jobs", () => {
    const packagesDir = tmpPackages();
    for (const folder of fs.readdirSync(repoPackages)) {
      const manifest = path.join(repoPackages, folder, "package.json");
      if (fs.existsSync(manifest)) write(path.join(packagesDir, folder, "package.json"), fs.readFileSync(manifest, "utf8"));
    }
    write(path.join(packagesDir, "mail/src/queue.ts"), 'import { enqueue } from "@forge/jobs";\n');
    expect(found(packagesDir)).toEqual([["mail/src/queue.ts", 1, 25, "import", "@forge/jobs"]]);
  });
});
