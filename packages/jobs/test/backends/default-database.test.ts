import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

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
      // Said once, on stderr (stdout stays the program's), however many calls used it.
      expect(stderr.match(/no db given/g)).toHaveLength(1);
      expect(stderr).toContain(`using the default database: the SQLite file ${join(realpathSync(cwd), "forge-jobs.db")} (DATABASE_URL is not set)`);
      expect(existsSync(join(cwd, "forge-jobs.db"))).toBe(true);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it("with DATABASE_URL set, the line names it", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "forge-jobs-default-"));
    try {
      const env = { ...process.env, DATABASE_URL: "sqlite:./from-env.db" };
      const { stderr } = await run(process.execPath, ["--import", tsx, script], { cwd, env, timeout: 60_000 });
      expect(stderr.match(/no db given/g)).toHaveLength(1);
      expect(stderr).toContain("using the default database: DATABASE_URL (sqlite:./from-env.db)");
      expect(existsSync(join(cwd, "from-env.db"))).toBe(true);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
