import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { scanIsolation, type Violation } from "./check.js";

/** The repo's packages/ folder, found from this file (tools/isolation/src/cli.ts). */
export const DEFAULT_PACKAGES_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../packages");

export function formatViolation(violation: Violation, cwd = process.cwd()): string {
  const { file, line, column, form, specifier, message } = violation;
  return `${path.relative(cwd, file)}:${line}:${column}  ${form}  ${specifier}  ${message}`;
}

/**
 * `tsx src/cli.ts [packagesDir]`: prints one line per violation and returns 1 when there is any,
 * 0 with a one-line summary otherwise, 2 when the folder cannot be read.
 */
export function runCli(
  args: readonly string[],
  out: (text: string) => void = (text) => process.stdout.write(text),
  err: (text: string) => void = (text) => process.stderr.write(text),
): number {
  const packagesDir = path.resolve(args[0] ?? DEFAULT_PACKAGES_DIR);
  let report;
  try {
    report = scanIsolation({ packagesDir });
  } catch (error) {
    err(`isolation: cannot check ${packagesDir}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  const { packages, files, violations } = report;
  if (violations.length > 0) {
    for (const violation of violations) out(`${formatViolation(violation)}\n`);
    err(`isolation: ${violations.length} cross-package reference(s) in ${packages.length} packages, ${files} files\n`);
    return 1;
  }
  out(`isolation: ${packages.length} packages, ${files} files, no cross-package reference\n`);
  return 0;
}

const entry = process.argv[1];
if (entry && import.meta.url === pathToFileURL(path.resolve(entry)).href) {
  process.exitCode = runCli(process.argv.slice(2));
}
