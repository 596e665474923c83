import { readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * `DATABASE_URL` from a `.env` file in the working directory, when the environment has none: an
 * app that keeps its database URL there (the sample does) and the CLI run from its folder then
 * open the same database, with no flag to repeat. Only that variable is read; the environment
 * and `--database-url` come first. Returns where the URL came from, or null.
 */
export function databaseUrlFromEnvFile(env: NodeJS.ProcessEnv, dir = process.cwd()): string | null {
  if (env.DATABASE_URL !== undefined) return null;
  const file = join(dir, ".env");
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return null;
  }
  const value = parseEnvFile(text).DATABASE_URL;
  if (value === undefined || value === "") return null;
  env.DATABASE_URL = value;
  return file;
}

/** `KEY=value` lines (`export ` allowed), `#` comments, values optionally in single or double quotes. */
export function parseEnvFile(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match) continue;
    let value = match[2]!;
    const quoted = /^(["'])(.*)\1$/.exec(value);
    if (quoted) value = quoted[2]!;
    else value = value.replace(/\s+#.*$/, "");
    values[match[1]!] = value;
  }
  return values;
}
