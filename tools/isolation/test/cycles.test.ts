import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { findCycles, formatCycle, workspaceSourceRoots } from "../src/cycles.js";
import { DEFAULT_REPO_ROOT, runCyclesCli } from "../src/cycles-cli.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const toolDir = path.resolve(here, "..");
const repoRoot = path.resolve(toolDir, "../..");
const fixture = (name: string): string => path.join(here, "fixtures/cycles", name);

/** The cycles of a tree, each as its chain with paths relative to the tree. */
function chains(root: string): string[] {
  return findCycles(workspaceSourceRoots(root)).cycles.map((cycle) => formatCycle(cycle, root));
}

const tmpDirs: string[] = [];
function tmpRepo(files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "cycles-"));
  tmpDirs.push(root);
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), text);
  }
  return root;
}
afterEach(() => {
  for (const dir of tmpDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe("findCycles on the fixtures", () => {
  it("reports each cycle as a chain of files: type-only, through a re-export, through import() types", () => {
    expect(chains(fixture("with-cycles"))).toEqual([
      "apps/app/src/x.ts:1 → apps/app/src/y.ts:1 ⇢ apps/app/src/z.ts:1 → apps/app/src/x.ts",
      "packages/a/src/a.ts:1 ⇢ packages/a/src/b.ts:1 ⇢ packages/a/src/a.ts",
      "tools/t/src/config.ts:1 ⇢ tools/t/src/queues/index.ts:3 → tools/t/src/config.ts",
    ]);
  });

  it("passes the clean fixture: a diamond, one-way imports, and cycles only through a test file or under test/", () => {
    const report = findCycles(workspaceSourceRoots(fixture("clean")));
    expect(report.cycles.map((cycle) => formatCycle(cycle, fixture("clean")))).toEqual([]);
    // packages/a/src without helper.test.ts, and apps/app/src; the import across them counts
    expect([report.roots.length, report.files, report.edges]).toEqual([2, 7, 7]);
  });
});

// a.ts reaches b.ts by the form under test; b.ts imports a.ts back.
const forms: [string, Record<string, string>, string][] = [
  ["import", { "a.ts": 'import { b } from "./b.js";\nexport const a = b;\n' }, "→"],
  ["import type", { "a.ts": 'import type { B } from "./b.js";\nexport type A = B;\n' }, "⇢"],
  ["import { type X } only", { "a.ts": 'import { type B } from "./b.js";\nexport type A = B;\n' }, "⇢"],
  ["side-effect import", { "a.ts": 'import "./b.js";\n' }, "→"],
  ["export *", { "a.ts": 'export * from "./b.js";\n' }, "→"],
  ["export * as", { "a.ts": 'export * as b from "./b.js";\n' }, "→"],
  ["export { } from", { "a.ts": 'export { b } from "./b.js";\n' }, "→"],
  ["export type { } from", { "a.ts": 'export type { B } from "./b.js";\n' }, "⇢"],
  ["import() type", { "a.ts": 'export type A = import("./b.js").B;\n' }, "⇢"],
  ["dynamic import()", { "a.ts": 'export const a = () => import("./b.js");\n' }, "→"],
  ["import = require()", { "a.ts": 'import b = require("./b.js");\nexport const a = b;\n' }, "→"],
  ["require() in .cts", { "a.cts": 'const b = require("./b.js");\nmodule.exports = b;\n' }, "→"],
  ["JSDoc import() in .js", { "a.js": '/** @type {import("./b.js").B} */\nexport const a = 1;\n' }, "⇢"],
  ["@import tag in .js", { "a.js": '/** @import { B } from "./b.js" */\nexport const a = 1;\n' }, "⇢"],
  ["folder index", { "a.ts": 'import { b } from "./b/index.js";\nexport const a = b;\n' }, "→"],
  ["extensionless", { "a.ts": 'import { b } from "./b";\nexport const a = b;\n' }, "→"],
  ["/// <reference path>", { "a.ts": '/// <reference path="./b.ts" />\nexport const a = 1;\n' }, "⇢"],
];

describe("every relative reference is an edge", () => {
  it.each(forms)("%s", (_form, files, arrow) => {
    const [aName] = Object.keys(files) as [string];
    const aImport = aName.endsWith(".cts") ? "./a.cjs" : "./a.js";
    const bFile = Object.values(files)[0]!.includes("./b/index.js") ? "b/index.ts" : "b.ts";
    const back = bFile === "b.ts" ? aImport : `.${aImport}`;
    const root = tmpRepo({
      [`packages/p/src/${aName}`]: files[aName]!,
      [`packages/p/src/${bFile}`]: `import { a } from "${back}";\nexport const b = a;\nexport type B = number;\n`,
    });
    expect(chains(root)).toEqual([`packages/p/src/${aName}:1 ${arrow} packages/p/src/${bFile}:1 → packages/p/src/${aName}`]);
  });

  it("a file that imports itself is a cycle; a cycle under dist/ or node_modules/ of src is not looked at", () => {
    const cycle = 'import "./two.js";\n';
    const back = 'import "./one.js";\n';
    const root = tmpRepo({
      "tools/t/src/self.ts": 'import type { Self } from "./self.js";\nexport type Self = { next?: Self };\n',
      "tools/t/src/dist/one.js": cycle,
      "tools/t/src/dist/two.js": back,
      "tools/t/src/node_modules/dep/one.js": cycle,
      "tools/t/src/node_modules/dep/two.js": back,
      "tools/t/src/__tests__/one.ts": cycle,
      "tools/t/src/__tests__/two.ts": back,
    });
    expect(chains(root)).toEqual(["tools/t/src/self.ts:1 ⇢ tools/t/src/self.ts"]);
  });

  it("reports, for a knot of files, cycles that together pass through every file of it", () => {
    // a → b → a and b → c → b: one knot, two cycles to break
    const root = tmpRepo({
      "apps/k/src/a.ts": 'import "./b.js";\n',
      "apps/k/src/b.ts": 'import "./a.js";\nimport "./c.js";\n',
      "apps/k/src/c.ts": 'import "./b.js";\n',
    });
    expect(chains(root)).toEqual(["apps/k/src/a.ts:1 → apps/k/src/b.ts:1 → apps/k/src/a.ts", "apps/k/src/c.ts:1 → apps/k/src/b.ts:2 → apps/k/src/c.ts"]);
  });
});

describe("the cycles CLI", () => {
  it("defaults to the repository root", () => {
    expect(DEFAULT_REPO_ROOT).toBe(repoRoot);
  });

  it("prints one line per cycle and returns 1", () => {
    const lines: string[] = [];
    const errors: string[] = [];
    const code = runCyclesCli(
      [fixture("with-cycles")],
      (text) => lines.push(text),
      (text) => errors.push(text),
    );
    expect(code).toBe(1);
    expect(lines).toHaveLength(3);
    expect(lines[1]).toBe("cycle: packages/a/src/a.ts:1 ⇢ packages/a/src/b.ts:1 ⇢ packages/a/src/a.ts\n");
    expect(errors.join("")).toContain("cycles: 3 import cycle(s) in 3 source folders, 8 files");
  });

  it("returns 2 for a folder with no source folder, rather than passing it", () => {
    const errors: string[] = [];
    expect(
      runCyclesCli(
        [tmpRepo({ "README.md": "" })],
        () => {},
        (text) => errors.push(text),
      ),
    ).toBe(2);
    expect(errors.join("")).toContain("no packages/*/src, apps/*/src or tools/*/src folder");
  });

  it("runs as a script: exit 0 with a summary when clean, 1 on a cycle", () => {
    const tsx = path.join(toolDir, "node_modules/.bin/tsx");
    const clean = spawnSync(tsx, ["src/cycles-cli.ts", fixture("clean")], { cwd: toolDir, encoding: "utf8" });
    expect(clean.stdout).toBe("cycles: 2 source folders, 7 files, 7 relative imports, no import cycle\n");
    expect(clean.status).toBe(0);
    const cyclic = spawnSync(tsx, ["src/cycles-cli.ts", fixture("with-cycles")], { cwd: toolDir, encoding: "utf8" });
    expect(cyclic.status).toBe(1);
  });
});

describe("the rule on the real workspace", () => {
  it("finds no import cycle in packages/*/src, apps/*/src, tools/*/src", () => {
    const report = findCycles(workspaceSourceRoots(repoRoot));
    expect(report.roots.map((root) => path.relative(repoRoot, root))).toEqual(
      expect.arrayContaining(["packages/jobs/src", "packages/mail/src", "packages/import-export/src", "apps/sample/src", "tools/isolation/src"]),
    );
    expect(report.cycles.map((cycle) => formatCycle(cycle, repoRoot))).toEqual([]);
  });

  it("`pnpm lint` runs the three checks (isolation, cycles, floors): the package's lint script", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(toolDir, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(manifest.scripts.lint).toBe("tsx src/cli.ts && tsx src/cycles-cli.ts && tsx src/floors-cli.ts");
    // turbo hashes this package's files only; a cached pass would hide a cycle added elsewhere
    const turbo = JSON.parse(fs.readFileSync(path.join(toolDir, "turbo.json"), "utf8")) as { tasks: { lint: { cache: boolean } } };
    expect(turbo.tasks.lint.cache).toBe(false);
  });
});
