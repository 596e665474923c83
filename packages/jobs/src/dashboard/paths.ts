import { readdirSync } from "node:fs";

// A stored error's stack names the server's files by absolute path (/srv/shop/releases/41/…):
// the page shows them relative to the working directory, from node_modules/ for a dependency,
// or as …/<file> — never the machine's layout. Only paths that start at one of this machine's
// top-level folders are touched, so a URL path in a message (/orgs/acme) is left as it is.

let roots: Set<string> | undefined;

function topLevel(): Set<string> {
  if (!roots) {
    try {
      roots = new Set(readdirSync("/"));
    } catch {
      roots = new Set();
    }
  }
  return roots;
}

const ABSOLUTE = /(?<=^|[\s('"`=])(?:file:\/\/)?(\/[^\s()'"`,;]+|[A-Za-z]:\\[^\s()'"`,;]+)/gm;

function shown(path: string, cwd: string): string | null {
  const windows = /^[A-Za-z]:\\/.test(path);
  const inside = cwd.length > 1 && path.startsWith(`${cwd}/`);
  if (!inside && !windows && !topLevel().has(path.split("/")[1] ?? "")) return null;
  const modules = path.lastIndexOf(windows ? "\\node_modules\\" : "/node_modules/");
  if (modules !== -1) return path.slice(modules + 1);
  if (inside) return path.slice(cwd.length + 1);
  return `…${windows ? "\\" : "/"}${path.split(/[\\/]/).pop()}`;
}

/** `text` (an error with its stack) with this server's absolute paths made relative or cut. */
export function withoutServerPaths(text: string, cwd = process.cwd()): string {
  return text.replace(ABSOLUTE, (match: string, path: string) => shown(path, cwd) ?? match);
}
