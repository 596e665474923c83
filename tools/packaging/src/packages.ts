import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const run = promisify(execFile);

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const PACKAGES_DIR = path.join(ROOT, "packages");
export const SAMPLE_DIR = path.join(ROOT, "apps", "sample");

/** The published packages: every folder under packages/. */
export function packageDirs(): string[] {
  return readdirSync(PACKAGES_DIR, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => path.join(PACKAGES_DIR, e.name))
    .sort();
}

export interface PackSize {
  name: string;
  /** The .tgz, in bytes. */
  size: number;
  unpackedSize: number;
  files: number;
}

/** What `npm pack` would publish for a package (a dry run: nothing is written). */
export async function packSize(dir: string): Promise<PackSize> {
  const { stdout } = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
  const [report] = JSON.parse(stdout) as { name: string; size: number; unpackedSize: number; entryCount: number }[];
  return { name: report!.name, size: report!.size, unpackedSize: report!.unpackedSize, files: report!.entryCount };
}

/** `pnpm pack` into `destination`; the tarball's path (the last line pnpm prints). */
export async function pack(dir: string, destination: string): Promise<string> {
  const { stdout } = await run("pnpm", ["pack", "--pack-destination", destination], { cwd: dir });
  return stdout.trim().split("\n").pop()!.trim();
}

export const kB = (bytes: number): string => `${(bytes / 1000).toFixed(1)} kB`;
