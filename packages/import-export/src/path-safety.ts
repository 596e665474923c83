import { realpath } from "node:fs/promises";
import path from "node:path";
import { messageOf } from "./errors.js";

export type SafePath =
  | { ok: true; path: string }
  /** `retryable: false` when the path itself is refused; true when the disk said no. */
  | { ok: false; retryable: boolean; message: string; cause?: unknown };

function isInside(parent: string, child: string): boolean {
  const relative = path.relative(parent, child);
  return relative !== "" && relative !== ".." && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative);
}

function refused(file: string, why: string): SafePath {
  return { ok: false, retryable: false, message: `file "${file}" is refused: ${why}` };
}

function unreadable(what: string, error: unknown): SafePath {
  return { ok: false, retryable: true, message: `${what}: ${messageOf(error)}`, cause: error };
}

/** The lexical check: refuses `..` and absolute paths elsewhere before the disk is asked anything. */
async function locate(baseDir: string, file: string): Promise<{ base: string; target: string } | SafePath> {
  const lexicalBase = path.resolve(baseDir);
  const target = path.resolve(lexicalBase, file);
  if (!isInside(lexicalBase, target)) return refused(file, "it is outside the base directory");
  try {
    return { base: await realpath(lexicalBase), target };
  } catch (error) {
    return unreadable(`base directory "${baseDir}" is unreadable`, error);
  }
}

/**
 * Resolves an existing file named relative to `baseDir`. Both sides go through
 * fs.realpath, so a symlink inside baseDir that points elsewhere is refused too.
 */
export async function resolveExistingFile(baseDir: string, file: string): Promise<SafePath> {
  const located = await locate(baseDir, file);
  if ("ok" in located) return located;
  let real: string;
  try {
    real = await realpath(located.target);
  } catch (error) {
    return unreadable(`file "${file}" cannot be read`, error);
  }
  if (!isInside(located.base, real)) return refused(file, "it resolves outside the base directory");
  return { ok: true, path: real };
}

/**
 * Resolves a file to be written relative to `baseDir`: its directory must exist and
 * resolve inside baseDir. The file itself need not exist; if it is a symlink, the rename
 * that publishes the new file replaces the link, never what it points to.
 */
export async function resolveNewFile(baseDir: string, file: string): Promise<SafePath> {
  const located = await locate(baseDir, file);
  if ("ok" in located) return located;
  let directory: string;
  try {
    directory = await realpath(path.dirname(located.target));
  } catch (error) {
    return unreadable(`directory of "${file}" cannot be used`, error);
  }
  if (directory !== located.base && !isInside(located.base, directory)) {
    return refused(file, "its directory resolves outside the base directory");
  }
  return { ok: true, path: path.join(directory, path.basename(located.target)) };
}
