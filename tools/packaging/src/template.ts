// apps/sample as a standalone app: its files, the packages packed beside them, and a manifest
// that points at those tarballs instead of the workspace. `pnpm create-app` and the
// template-copy test share this one route.
import { existsSync } from "node:fs";
import { copyFile, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { pack, packageDirs, ROOT, run, SAMPLE_DIR } from "./packages.js";

/** Where the copy keeps the packed packages, relative to its root (what `file:` specs name). */
export const VENDOR_DIR = "vendor";

/** Native builds the copy allows at install: better-sqlite3 (the default database) and esbuild (tsx). */
export const BUILT_DEPENDENCIES = ["better-sqlite3", "esbuild"];

/** A bad argument or state: the message says what to fix; nothing has been written. */
export class CreateAppError extends Error {}

/** `dependencies.<name>` / `devDependencies.<name>` → the version pnpm-lock.yaml resolved for apps/sample (workspace links left out). */
export async function lockedVersions(): Promise<Record<string, string>> {
  const lock = await readFile(path.join(ROOT, "pnpm-lock.yaml"), "utf8");
  const section = /^ {2}apps\/sample:\n([\s\S]*?)(?=^ {2}\S|^\S)/m.exec(lock)?.[1];
  if (!section) throw new CreateAppError("pnpm-lock.yaml has no importer apps/sample: run pnpm install at the repository's root");
  const versions: Record<string, string> = {};
  let field = "";
  for (const m of section.matchAll(/^ {4}(dependencies|devDependencies):$|^ {6}'?([^':\s]+)'?:\n {8}specifier: .*\n {8}version: ([^\s(]+)/gm)) {
    if (m[1]) field = m[1];
    else if (!m[3]!.startsWith("link:")) versions[`${field}.${m[2]}`] = m[3]!;
  }
  return versions;
}

/** A folder name as an npm package name: lowercase, and only the characters npm allows. */
export function appName(target: string): string {
  const name = path
    .basename(path.resolve(target))
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[._-]+|-+$/g, "");
  return name || "my-app";
}

/** The target must be new or an empty folder: a copy never overwrites someone's files. */
export async function checkTarget(target: string): Promise<void> {
  if (!existsSync(target)) return;
  if (!(await stat(target)).isDirectory()) throw new CreateAppError(`${target} is a file: name a new folder for the app`);
  if ((await readdir(target)).length > 0) throw new CreateAppError(`${target} exists and is not empty: name a new folder for the app (nothing was written)`);
}

/** Every package's types exist: `pnpm pack` ships dist/, and a missing build would pack an empty package. */
export async function checkBuilt(): Promise<void> {
  for (const dir of packageDirs()) {
    const manifest = JSON.parse(await readFile(path.join(dir, "package.json"), "utf8")) as { types: string };
    // The types come last in a build: a build still running would pack a package without them.
    if (!existsSync(path.join(dir, manifest.types)))
      throw new CreateAppError(`${path.join(dir, manifest.types)} is missing: run pnpm build at the repository's root first (and let it finish)`);
  }
}

/** apps/sample's files as git has them (tracked and new, not ignored: no node_modules or data), from the working tree. */
async function copySample(target: string): Promise<void> {
  const { stdout } = await run("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "."], { cwd: SAMPLE_DIR });
  for (const file of stdout.split("\0").filter(Boolean)) {
    if (!existsSync(path.join(SAMPLE_DIR, file))) continue; // deleted, not yet committed
    await mkdir(path.dirname(path.join(target, file)), { recursive: true });
    await copyFile(path.join(SAMPLE_DIR, file), path.join(target, file));
  }
}

interface Manifest {
  name: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  pnpm?: { onlyBuiltDependencies?: string[] };
  [field: string]: unknown;
}

/**
 * The copy's package.json: its own name; each package from its tarball (`file:vendor/…`); the
 * other dependencies pinned to the versions the monorepo's lockfile gives the sample, so the copy
 * installs what the monorepo tests (and better-sqlite3's native build pnpm's store already has);
 * the native builds allowed, which only a project's root manifest can do.
 */
export function standaloneManifest(manifest: Manifest, name: string, tarballs: Record<string, string>, locked: Record<string, string>): Manifest {
  const out: Manifest = { ...manifest, name, dependencies: { ...manifest.dependencies }, devDependencies: { ...manifest.devDependencies } };
  for (const [key, version] of Object.entries(locked)) {
    const [field, dep] = [key.slice(0, key.indexOf(".")), key.slice(key.indexOf(".") + 1)] as ["dependencies" | "devDependencies", string];
    if (out[field][dep] !== undefined) out[field][dep] = version;
  }
  for (const [dep, file] of Object.entries(tarballs)) out.dependencies[dep] = `file:${VENDOR_DIR}/${file}`;
  const leftover = Object.entries({ ...out.dependencies, ...out.devDependencies }).find(([, spec]) => spec.startsWith("workspace:"));
  if (leftover) throw new CreateAppError(`${leftover[0]} is a workspace package that is not under packages/: the copy could not install it`);
  out.pnpm = { ...manifest.pnpm, onlyBuiltDependencies: BUILT_DEPENDENCIES };
  return out;
}

const GITIGNORE = `node_modules/
data/
test-results/
*.db
*.db-wal
*.db-shm
`;

/** Copies apps/sample to `target`, packs the packages into `<target>/vendor/` and wires the copy to them. */
export async function createApp(target: string): Promise<{ name: string; tarballs: Record<string, string> }> {
  await checkTarget(target);
  await checkBuilt();
  const locked = await lockedVersions();
  const name = appName(target);
  const created = !existsSync(target);
  try {
    await copySample(target);
    const tarballs: Record<string, string> = {};
    for (const dir of packageDirs()) {
      const manifest = JSON.parse(await readFile(path.join(dir, "package.json"), "utf8")) as { name: string };
      tarballs[manifest.name] = path.basename(await pack(dir, path.join(target, VENDOR_DIR)));
    }
    const manifestFile = path.join(target, "package.json");
    const manifest = JSON.parse(await readFile(manifestFile, "utf8")) as Manifest;
    await writeFile(manifestFile, `${JSON.stringify(standaloneManifest(manifest, name, tarballs, locked), null, 2)}\n`);
    // In the monorepo the root's .gitignore covers these; the copy is a repository of its own.
    if (!existsSync(path.join(target, ".gitignore"))) await writeFile(path.join(target, ".gitignore"), GITIGNORE);
    return { name, tarballs };
  } catch (error) {
    // A half-made copy would look like a finished one: take it away (the folder was checked empty).
    if (created) await rm(target, { recursive: true, force: true });
    else for (const entry of await readdir(target)) await rm(path.join(target, entry), { recursive: true, force: true });
    throw error;
  }
}
