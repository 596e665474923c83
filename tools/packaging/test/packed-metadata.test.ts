// Issue 16.16, for every published package and not only @forge/jobs: what the registry page and
// a user's node_modules get comes from the packed tarball, so the tarball is what is checked —
// the license file in it, the metadata npm shows, and `files`/`exports` that name only what exists.
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pack, packageDirs, ROOT, run } from "../src/packages.js";

interface Manifest {
  name: string;
  license?: string;
  files?: string[];
  main?: string;
  types?: string;
  exports?: unknown;
  bin?: Record<string, string>;
  repository?: { type?: string; url?: string; directory?: string };
  homepage?: string;
  bugs?: { url?: string };
  keywords?: unknown;
}

/** Every file path an `exports` map points at (conditions nested at any depth). */
function exportTargets(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (value && typeof value === "object") return Object.values(value).flatMap(exportTargets);
  return [];
}

const dirs = packageDirs();
let out: string;
beforeAll(async () => {
  out = await mkdtemp(path.join(tmpdir(), "forge-packed-"));
});
afterAll(() => rm(out, { recursive: true, force: true }));

it("checks the three published packages", () => {
  expect(dirs.map((d) => path.relative(ROOT, d)).sort()).toEqual(["packages/import-export", "packages/jobs", "packages/mail"]);
});

describe.each(dirs.map((dir) => ({ dir, folder: path.relative(ROOT, dir) })))("the packed tarball of $folder", ({ dir, folder }) => {
  let entries: string[];
  let manifest: Manifest;
  let unpacked: string;

  beforeAll(async () => {
    if (!existsSync(path.join(dir, "dist"))) throw new Error(`${folder}/dist is missing: run pnpm build first`);
    const tarball = await pack(dir, out);
    unpacked = await mkdtemp(path.join(out, "unpacked-"));
    await run("tar", ["-xzf", tarball, "-C", unpacked, "--strip-components=1"]);
    entries = (await run("tar", ["-tzf", tarball])).stdout
      .split("\n")
      .filter(Boolean)
      .map((entry) => entry.replace(/^package\//, ""));
    manifest = JSON.parse(await readFile(path.join(unpacked, "package.json"), "utf8")) as Manifest;
  });

  it("has the MIT LICENSE its package.json names, identical to the repository's, and its README", async () => {
    expect(manifest.license).toBe("MIT");
    expect(entries).toEqual(expect.arrayContaining(["LICENSE", "README.md", "package.json"]));
    const license = await readFile(path.join(unpacked, "LICENSE"), "utf8");
    expect(license).toMatch(/^MIT License\n/);
    expect(license).toBe(await readFile(path.join(ROOT, "LICENSE"), "utf8"));
  });

  it("has repository, homepage, bugs and keywords pointing at this package of this repository", async () => {
    const root = JSON.parse(await readFile(path.join(dir, "package.json"), "utf8")) as Manifest;
    expect(manifest.repository).toEqual({ type: "git", url: expect.stringMatching(/^git\+https:\/\/github\.com\/[\w.-]+\/[\w.-]+\.git$/), directory: folder });
    const repo = manifest.repository!.url!.replace(/^git\+/, "").replace(/\.git$/, "");
    expect(manifest.homepage).toBe(`${repo}/tree/main/${folder}#readme`);
    expect(manifest.bugs).toEqual({ url: `${repo}/issues` });
    expect(Array.isArray(manifest.keywords) && manifest.keywords.length > 0 && manifest.keywords.every((k) => typeof k === "string" && k !== "")).toBe(true);
    // pnpm rewrites workspace: ranges when packing; the metadata must come through unchanged.
    expect({ repository: root.repository, homepage: root.homepage, bugs: root.bugs, keywords: root.keywords }).toEqual({
      repository: manifest.repository,
      homepage: manifest.homepage,
      bugs: manifest.bugs,
      keywords: manifest.keywords,
    });
  });

  it("lists in files only what ships (no CHANGELOG.md before the first release), and every export, main, types and bin is in the tarball", () => {
    expect(manifest.files).toBeDefined();
    for (const listed of manifest.files!)
      expect(
        entries.some((e) => e === listed || e.startsWith(`${listed}/`)),
        `files lists ${listed}`,
      ).toBe(true);
    const targets = [...exportTargets(manifest.exports), manifest.main, manifest.types, ...Object.values(manifest.bin ?? {})].filter(
      (t): t is string => typeof t === "string",
    );
    expect(targets.length).toBeGreaterThan(2);
    for (const target of targets) expect(entries, `${target} is referenced by package.json`).toContain(target.replace(/^\.\//, ""));
  });

  it("ships no sources, tests or unused CLI builds", () => {
    expect(entries.filter((e) => /^(src|test)\//.test(e) || /\.test\.[cm]?[jt]s$/.test(e))).toEqual([]);
    expect(entries.filter((e) => /^dist\/cli\.(js|mjs)$/.test(e))).toEqual([]);
  });
});
