import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { findCycles, formatCycle, workspaceSourceRoots, type CycleReport } from "./cycles.js";

/** The repository root, found from this file (tools/isolation/src/cycles-cli.ts). */
export const DEFAULT_REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/**
 * `tsx src/cycles-cli.ts [repoRoot]`: prints one line per import cycle among the source files of
 * repoRoot's packages/*\/src, apps/*\/src and tools/*\/src, and returns 1 when there is any; 0 with
 * a one-line summary otherwise; 2 when the folder cannot be read or holds no source folder.
 */
export function runCyclesCli(
  args: readonly string[],
  out: (text: string) => void = (text) => process.stdout.write(text),
  err: (text: string) => void = (text) => process.stderr.write(text),
): number {
  const root = path.resolve(args[0] ?? DEFAULT_REPO_ROOT);
  let report: CycleReport;
  try {
    if (!fs.statSync(root).isDirectory()) throw new Error("not a directory");
    const roots = workspaceSourceRoots(root);
    // An empty walk would pass silently: a wrong path must not look like a clean tree.
    if (roots.length === 0) throw new Error("no packages/*/src, apps/*/src or tools/*/src folder in it");
    report = findCycles(roots);
  } catch (error) {
    err(`cycles: cannot check ${root}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  const { roots, files, edges, cycles } = report;
  if (cycles.length > 0) {
    for (const cycle of cycles) out(`cycle: ${formatCycle(cycle, root)}\n`);
    err(
      `cycles: ${cycles.length} import cycle(s) in ${roots.length} source folders, ${files} files (→ import, ⇢ type-only import; ` +
        "move what both sides need to a module of its own that imports neither)\n",
    );
    return 1;
  }
  out(`cycles: ${roots.length} source folders, ${files} files, ${edges} relative imports, no import cycle\n`);
  return 0;
}

const entry = process.argv[1];
if (entry && import.meta.url === pathToFileURL(path.resolve(entry)).href) {
  process.exitCode = runCyclesCli(process.argv.slice(2));
}
