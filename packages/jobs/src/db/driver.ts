import { createRequire } from "node:module";

/**
 * Database drivers other than pg are optional peer dependencies: loaded on first use, so an
 * application on PostgreSQL never needs better-sqlite3 or mysql2 installed.
 */
const requireHere = createRequire(import.meta.url);
const loaded = new Map<string, unknown>();

export function loadDriver<T>(moduleName: string, install: string, backend: string): T {
  if (loaded.has(moduleName)) return loaded.get(moduleName) as T;
  let driver: T;
  try {
    driver = requireHere(moduleName) as T;
  } catch (error) {
    if (isMissing(error, moduleName)) {
      throw new Error(`${backend} needs the optional package "${install.replace(/@[^@/]*$/, "")}", which is not installed: npm install ${install}`, {
        cause: error,
      });
    }
    throw error; // installed but broken (e.g. a native build for another Node): say so as it is
  }
  loaded.set(moduleName, driver);
  return driver;
}

function isMissing(error: unknown, moduleName: string): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === "MODULE_NOT_FOUND" && typeof message === "string" && message.includes(`'${moduleName}'`);
}
