import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The installed @forge/jobs version, read from its package.json: the nearest one above this
 * module that names the package (dist/ in a release, src/cli/ in the repository).
 */
export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, "package.json");
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (pkg.name === "@forge/jobs" && pkg.version) return pkg.version;
    }
    const up = dirname(dir);
    if (up === dir) return "unknown";
    dir = up;
  }
}
