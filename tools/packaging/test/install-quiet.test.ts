// A plain `pnpm install` says nothing a user must act on (issue 34.3): no "Ignored build scripts
// … Run pnpm approve-builds" box, no "pnpm.onlyBuiltDependencies … will not take effect" WARN.
// pnpm asks about every installed package with an install script that the workspace neither
// allows nor ignores, and warns about a `pnpm` field in any package.json but the root's.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../src/packages.js";

/** A list setting of pnpm-workspace.yaml (`key:` followed by `  - item` lines). */
function workspaceList(key: string): string[] {
  const text = readFileSync(path.join(ROOT, "pnpm-workspace.yaml"), "utf8");
  const block = new RegExp(`^${key}:\\n((?:\\s+- .*\\n?)*)`, "m").exec(text)?.[1] ?? "";
  return [...block.matchAll(/- ['"]?([^'"\n]+)['"]?/g)].map((m) => m[1]!.trim());
}

/** Installed packages (node_modules/.pnpm) whose install pnpm would run: an install script or a binding.gyp. */
function packagesWithBuilds(): string[] {
  const store = path.join(ROOT, "node_modules", ".pnpm");
  const names = new Set<string>();
  for (const entry of readdirSync(store)) {
    const modules = path.join(store, entry, "node_modules");
    if (!existsSync(modules)) continue;
    for (const top of readdirSync(modules)) {
      for (const name of top.startsWith("@") ? readdirSync(path.join(modules, top)).map((n) => `${top}/${n}`) : [top]) {
        const dir = path.join(modules, name);
        const manifestFile = path.join(dir, "package.json");
        // the other entries of a package's node_modules are links to its dependencies: each is seen in its own entry
        if (!entry.startsWith(name.replace("/", "+") + "@") || !existsSync(manifestFile)) continue;
        const scripts = (JSON.parse(readFileSync(manifestFile, "utf8")) as { scripts?: Record<string, string> }).scripts ?? {};
        if (scripts.preinstall || scripts.install || scripts.postinstall || existsSync(path.join(dir, "binding.gyp"))) names.add(name);
      }
    }
  }
  return [...names].sort();
}

describe("pnpm install, quiet and honest", () => {
  it("every installed package with an install script is allowed or ignored in pnpm-workspace.yaml (no approve-builds box)", () => {
    const decided = new Set([...workspaceList("onlyBuiltDependencies"), ...workspaceList("ignoredBuiltDependencies")]);
    expect(workspaceList("onlyBuiltDependencies")).toContain("better-sqlite3");
    expect(packagesWithBuilds().filter((name) => !decided.has(name))).toEqual([]);
  });

  it("no package.json carries a pnpm field (pnpm reads it at the root only, and warns elsewhere); the settings live in pnpm-workspace.yaml", () => {
    const manifests = [
      "package.json",
      ...["packages", "apps", "tools"].flatMap((d) => readdirSync(path.join(ROOT, d)).map((n) => path.join(d, n, "package.json"))),
      "bench/package.json",
    ];
    const withField = manifests.filter(
      (file) => existsSync(path.join(ROOT, file)) && "pnpm" in (JSON.parse(readFileSync(path.join(ROOT, file), "utf8")) as object),
    );
    expect(withField).toEqual([]);
  });
});
