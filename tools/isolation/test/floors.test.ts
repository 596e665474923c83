import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { checkFloors, findHouses, readRules } from "../src/floors.js";
import { runFloorsCli } from "../src/floors-cli.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const toolDir = path.resolve(here, "..");
const repoRoot = path.resolve(toolDir, "../..");
const fixture = (name: string): string => path.join(here, "fixtures/floors", name, "house.json");

const tmpDirs: string[] = [];
afterEach(() => {
  for (const dir of tmpDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe("checkFloors", () => {
  it("reports an upward import, a backend's file imported from outside its folder, and a room on no floor", () => {
    const found = checkFloors(fixture("planted")).map((v) => `${v.rule} ${v.file}:${v.line}`);
    expect(found.sort()).toEqual(["own-folder ops/op.ts:1", "unplaced stray/stray.ts:1", "upward base/errors.ts:1"]);
    const upward = checkFloors(fixture("planted")).find((v) => v.rule === "upward")!;
    expect(upward.message).toBe("base/errors.ts:1 imports top/top.ts, a floor above (top, index.ts); base may import only base");
  });

  it("passes a house whose imports all go down or along, through the dialects' index", () => {
    expect(checkFloors(fixture("clean"))).toEqual([]);
  });

  it("refuses a malformed house.json instead of passing with no rule", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "floors-"));
    tmpDirs.push(dir);
    for (const [text, error] of [
      ["{}", /"floors" must be/],
      ['{ "floors": [["a"], ["a"]] }', /room "a" stands on two floors/],
      ['{ "floors": [["a"]], "ownFolderOnly": "x" }', /"ownFolderOnly" must be/],
    ] as const) {
      fs.writeFileSync(path.join(dir, "house.json"), text);
      expect(() => readRules(path.join(dir, "house.json"))).toThrow(error);
    }
  });
});

describe("the workspace", () => {
  it("declares the floors of @forge/jobs, and every import there stands on its floor or below", () => {
    const houses = findHouses(repoRoot).map((h) => path.relative(repoRoot, h));
    expect(houses).toContain("packages/jobs/house.json");
    expect(
      runFloorsCli(
        [repoRoot],
        () => undefined,
        () => undefined,
      ),
    ).toBe(0);
  });

  it("fails on an upward import planted in a copy of @forge/jobs (a driver importing the worker)", () => {
    const copy = fs.mkdtempSync(path.join(os.tmpdir(), "floors-jobs-"));
    tmpDirs.push(copy);
    fs.mkdirSync(path.join(copy, "packages"));
    fs.cpSync(path.join(repoRoot, "packages/jobs/src"), path.join(copy, "packages/jobs/src"), { recursive: true });
    fs.cpSync(path.join(repoRoot, "packages/jobs/house.json"), path.join(copy, "packages/jobs/house.json"));
    const driver = path.join(copy, "packages/jobs/src/db/executor.ts");
    fs.writeFileSync(driver, `import type { Worker } from "../worker/worker.js";\nexport type Planted = Worker;\n${fs.readFileSync(driver, "utf8")}`);
    const lines: string[] = [];
    expect(
      runFloorsCli(
        [copy],
        (t) => lines.push(t),
        () => undefined,
      ),
    ).toBe(1);
    expect(lines.join("")).toContain("packages/jobs/src/db/executor.ts:1 imports worker/worker.ts, a floor above (worker); db may import only base, db");
  });

  it("runs as a script: exit 1 with one line per violation", () => {
    const tsx = path.join(toolDir, "node_modules/.bin/tsx");
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "floors-cli-"));
    tmpDirs.push(root);
    fs.cpSync(path.dirname(fixture("planted")), path.join(root, "packages/planted"), { recursive: true });
    const result = spawnSync(tsx, ["src/floors-cli.ts", root], { cwd: toolDir, encoding: "utf8" });
    expect(result.status).toBe(1);
    expect(result.stdout.trim().split("\n")).toHaveLength(3);
    expect(result.stderr).toContain("3 import(s) against the floors of house.json");
  });
});
