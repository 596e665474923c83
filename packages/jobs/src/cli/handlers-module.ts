import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Handlers } from "../base/types.js";
import { UsageError } from "./usage.js";

/** Extensions Node does not load by itself before type stripping (22.18 / 23.6). */
const TYPESCRIPT = /\.(?:ts|mts|cts|tsx)$/i;

/** The `{ taskName: handler }` object a handlers module (`worker <module>`, `doctor --handlers`) exports. */
export async function loadHandlers(modulePath: string): Promise<Handlers> {
  const file = resolve(modulePath);
  let loaded: Record<string, unknown>;
  try {
    loaded = TYPESCRIPT.test(file) ? await importTypeScript(file, modulePath) : await importModule(pathToFileURL(file).href);
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`cannot load handlers module ${modulePath}: ${(error as Error).message.split("\n")[0]}`);
  }
  // CJS modules imported from ESM arrive as { default: module.exports }, and a TypeScript
  // module compiled to CJS as { default: { default: handlers } }.
  const inner = loaded.default as Record<string, unknown> | undefined;
  const candidate =
    inner?.handlers ?? (inner && "default" in inner && typeof inner.default === "object" ? inner.default : undefined) ?? inner ?? loaded.handlers;
  if (typeof candidate !== "object" || candidate === null || Object.values(candidate).some((h) => typeof h !== "function")) {
    throw new UsageError(`${modulePath} must export default (or 'handlers') an object of { taskName: handler function }`);
  }
  return candidate as Handlers;
}

async function importModule(url: string): Promise<Record<string, unknown>> {
  // isolation-allow-dynamic: the application's handlers module, named on the command line
  return (await import(url)) as Record<string, unknown>;
}

/**
 * A TypeScript handlers module goes through the application's own tsx (`tsImport`, for this
 * import only), found from the module's folder: `node --import tsx <bin>` cannot work where the
 * package manager links the bin as a shell script (pnpm), so the CLI does it itself. Without
 * tsx, Node may still strip the types itself; if not, the error says what to install.
 */
async function importTypeScript(file: string, modulePath: string): Promise<Record<string, unknown>> {
  const api = tsxApi(file) ?? tsxApi(resolve("package.json"));
  const url = pathToFileURL(file).href;
  if (api === undefined) {
    try {
      return await importModule(url);
    } catch (error) {
      if ((error as { code?: unknown }).code !== "ERR_UNKNOWN_FILE_EXTENSION") throw error;
      throw new UsageError(
        `${modulePath} is TypeScript and tsx is not installed: add it to your app (npm install -D tsx, or pnpm add -D tsx), or pass the compiled .js module`,
      );
    }
  }
  // The ESM build of tsx's API: its CommonJS one cannot find its own loader (tsx 4.23).
  const { tsImport } = (await importModule(api)) as { tsImport: (specifier: string, parentURL: string) => Promise<unknown> };
  return (await tsImport(url, pathToFileURL(resolve("package.json")).href)) as Record<string, unknown>;
}

/** The file URL of `tsx/esm/api` (its `import` condition) as installed for `from`, or undefined. */
function tsxApi(from: string): string | undefined {
  try {
    const manifestFile = createRequire(from).resolve("tsx/package.json");
    const manifest = JSON.parse(readFileSync(manifestFile, "utf8")) as { exports?: Record<string, { import?: string | { default?: string } }> };
    const target = manifest.exports?.["./esm/api"]?.import;
    const entry = typeof target === "string" ? target : target?.default;
    return entry === undefined ? undefined : pathToFileURL(join(dirname(manifestFile), entry)).href;
  } catch {
    return undefined; // not installed there
  }
}
