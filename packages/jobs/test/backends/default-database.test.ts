import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it, vi } from "vitest";
import type { Logger } from "../../src/index.js";

const run = promisify(execFile);
const tsx = createRequire(import.meta.url).resolve("tsx");
const script = fileURLToPath(new URL("./fixtures/default-database.ts", import.meta.url));

describe("the default database", () => {
  it("with no db and no DATABASE_URL, the queue is forge-jobs.db (SQLite) in the working directory", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "forge-jobs-default-"));
    try {
      const env = { ...process.env };
      delete env.DATABASE_URL;
      const { stdout, stderr } = await run(process.execPath, ["--import", tsx, script], { cwd, env, timeout: 60_000 });
      expect(JSON.parse(stdout)).toEqual({ ran: true, status: "done", result: "hello world" });
      expect(stderr).not.toContain("@forge/jobs"); // no logger given: the library prints nothing
      expect(existsSync(join(cwd, "forge-jobs.db"))).toBe(true);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it("says once, through the first logger that asks, which default database it opened", async () => {
    vi.resetModules(); // a fresh module: no default database opened yet in this process
    const { resolveDb, closeDefaultDatabase } = await import("../../src/core/connect.js");
    const saved = process.env.DATABASE_URL;
    process.env.DATABASE_URL = "sqlite::memory:";
    const lines: [object, string | undefined][] = [];
    const logger: Logger = { debug() {}, info: (fields, msg) => lines.push([fields, msg]), warn() {}, error() {} };
    try {
      const db = resolveDb(undefined); // enqueue, getJob…: no logger, nothing said yet
      expect(resolveDb(undefined, logger)).toBe(db);
      expect(resolveDb(undefined, logger)).toBe(db);
      expect(lines).toEqual([
        [
          { database: "sqlite::memory:", source: "DATABASE_URL" },
          "@forge/jobs: no db given, using the default database sqlite::memory: (DATABASE_URL); pass { db } to choose one",
        ],
      ]);
      expect(resolveDb(db, logger)).toBe(db); // a db given explicitly is never announced
      expect(lines).toHaveLength(1);
    } finally {
      if (saved === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = saved;
      await closeDefaultDatabase();
    }
  });
});
