import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const pkgDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Each subpath of package.json "exports" (besides ./package.json) and the source tsup builds it from. */
const ENTRY_POINTS: Record<string, string> = {
  ".": "src/index.ts",
  "./dashboard": "src/dashboard/index.ts",
};
/** Literal specifiers, so the isolation rule can check them. */
const BUILT: Record<string, { file: string; load: () => Promise<object> }> = {
  ".": { file: "dist/index.js", load: () => import("../dist/index.js") },
  "./dashboard": { file: "dist/dashboard.js", load: () => import("../dist/dashboard.js") },
};

/** Every name an entry point exports, type-only ones and `export *` included. */
function exportNames(entries: string[]): Map<string, string[]> {
  const config = ts.getParsedCommandLineOfConfigFile(path.join(pkgDir, "tsconfig.json"), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  const program = ts.createProgram(entries, { ...config!.options, noEmit: true });
  const checker = program.getTypeChecker();
  return new Map(
    entries.map((entry) => {
      const module = checker.getSymbolAtLocation(program.getSourceFile(entry)!)!;
      return [
        entry,
        checker
          .getExportsOfModule(module)
          .map((symbol) => symbol.getName())
          .sort(),
      ];
    }),
  );
}

/**
 * The names the README shows in code font: a code span that is the name, or starts with it
 * (`enqueue(task, payload?)`). Fenced blocks do not count: an import in an example documents nothing.
 */
function documentedNames(readme: string): (name: string) => boolean {
  const spans = [...readme.replace(/^```[^\n]*\n[\s\S]*?^```/gm, "").matchAll(/`([^`]+)`/g)].map((m) => m[1]!.trim());
  return (name) => spans.some((span) => span.startsWith(name) && !/[\w$]/.test(span.charAt(name.length)));
}

async function loadBuilt({ file, load }: { file: string; load: () => Promise<object> }): Promise<object> {
  if (!existsSync(path.join(pkgDir, file))) throw new Error(`${file} is missing: run \`pnpm build\` first`);
  return load();
}

describe("the public surface", () => {
  const manifest = JSON.parse(readFileSync(path.join(pkgDir, "package.json"), "utf8")) as { exports: Record<string, unknown> };
  const names = exportNames(Object.values(ENTRY_POINTS).map((file) => path.join(pkgDir, file)));

  it("covers every entry point in package.json exports", () => {
    expect(
      Object.keys(manifest.exports)
        .filter((key) => key !== "./package.json")
        .sort(),
    ).toEqual(Object.keys(ENTRY_POINTS).sort());
  });

  const isDocumented = documentedNames(readFileSync(path.join(pkgDir, "README.md"), "utf8"));
  it.each(Object.entries(ENTRY_POINTS))("README.md names every export of %s in code font", (_subpath, file) => {
    const exported = names.get(path.join(pkgDir, file))!;
    expect(exported.length).toBeGreaterThan(0);
    expect(exported.filter((name) => !isDocumented(name))).toEqual([]);
  });

  it.each(Object.entries(BUILT))("the build of %s exports at run time only names the README gives", async (_subpath, built) => {
    const runtime = Object.keys(await loadBuilt(built));
    expect(runtime.length).toBeGreaterThan(0);
    expect(runtime.filter((name) => !isDocumented(name))).toEqual([]);
  });

  it("the dashboard entry exports what an application mounts it with, and no rendering helper", async () => {
    expect(names.get(path.join(pkgDir, ENTRY_POINTS["./dashboard"]!))).toEqual(["DashboardHandler", "DashboardOptions", "createDashboard"]);
    expect(Object.keys(await loadBuilt(BUILT["./dashboard"]!))).toEqual(["createDashboard"]);
  });
});
