// Each package's README is its API: every name each public entry point exports — type-only
// ones and `export *` included, read with the TypeScript compiler — is named in code font in
// the package's README.md, and so is every name its build exports at run time. One test for
// every package under packages/ (a test inside a package could not be shared with the others
// without crossing the package rule).
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const PACKAGES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../packages");

interface EntryPoint {
  subpath: string;
  /** The TypeScript entry tsup builds it from. */
  source: string;
  /** The ESM build. */
  built: string;
}

/** Each subpath of package.json "exports" (besides ./package.json), with its source and its build. */
function entryPoints(dir: string): EntryPoint[] {
  const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { exports: Record<string, string | { import?: { default?: string } }> };
  return Object.entries(manifest.exports)
    .filter(([subpath]) => subpath !== "./package.json")
    .map(([subpath, target]) => {
      const name = subpath === "." ? "index" : subpath.slice(2);
      const source = [`src/${name}.ts`, `src/${name}/index.ts`].map((f) => path.join(dir, f)).find((f) => existsSync(f));
      if (!source) throw new Error(`${dir}: no source found for the entry point ${subpath}`);
      const built = typeof target === "string" ? target : target.import?.default;
      if (!built) throw new Error(`${dir}: the entry point ${subpath} has no ESM build in package.json exports`);
      return { subpath, source, built: path.join(dir, built) };
    });
}

/** Every name a source entry exports. */
function exportNames(dir: string, source: string): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(path.join(dir, "tsconfig.json"), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  const program = ts.createProgram([source], { ...config!.options, noEmit: true });
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(source)!)!;
  return checker
    .getExportsOfModule(module)
    .map((symbol) => symbol.getName())
    .sort();
}

/**
 * The names a README shows in code font: a code span that is the name, or starts with it
 * (`enqueue(task, payload?)`). Fenced blocks do not count: an import in an example documents nothing.
 */
function documentedNames(readme: string): (name: string) => boolean {
  const spans = [...readme.replace(/^```[^\n]*\n[\s\S]*?^```/gm, "").matchAll(/`([^`]+)`/g)].map((m) => m[1]!.trim());
  return (name) => spans.some((span) => span.startsWith(name) && !/[\w$]/.test(span.charAt(name.length)));
}

const packages = readdirSync(PACKAGES).filter((name) => existsSync(path.join(PACKAGES, name, "package.json")));

describe.each(packages)("the public surface of packages/%s", (name) => {
  const dir = path.join(PACKAGES, name);
  const isDocumented = documentedNames(readFileSync(path.join(dir, "README.md"), "utf8"));
  const entries = entryPoints(dir);

  it.each(entries.map((e) => [e.subpath, e] as const))("README.md names every export of %s in code font", (_subpath, entry) => {
    const exported = exportNames(dir, entry.source);
    expect(exported.length).toBeGreaterThan(0);
    expect(exported.filter((n) => !isDocumented(n))).toEqual([]);
  });

  it.each(entries.map((e) => [e.subpath, e] as const))("the build of %s exports at run time only names the README gives", async (_subpath, entry) => {
    if (!existsSync(entry.built)) throw new Error(`${entry.built} is missing: run \`pnpm build\` first`);
    const runtime = Object.keys((await import(pathToFileURL(entry.built).href)) as object);
    expect(runtime.length).toBeGreaterThan(0);
    expect(runtime.filter((n) => !isDocumented(n))).toEqual([]);
  });
});
