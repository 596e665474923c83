import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { connect, latestVersion, migrate, migrationSql, schemaVersion } from "../src/index.js";
import { backends } from "./helpers/backends.js";

const run = promisify(execFile);
const tsx = createRequire(import.meta.url).resolve("tsx");
const script = fileURLToPath(new URL("./fixtures/migrate.ts", import.meta.url));

describe.each(backends())("migrate ($name)", (backend) => {
  it("five processes migrating at once end with one schema and no error; twice changes nothing", async () => {
    const target = await backend.blank();
    try {
      const results = await Promise.all(
        Array.from({ length: 5 }, () => run(process.execPath, ["--import", tsx, script, target.url, target.schema ?? ""], { timeout: 60_000 })),
      );
      const outcomes = results.map((r) => JSON.parse(r.stdout) as { applied: number[]; version: number });
      const latest = latestVersion(backend.name);
      // Exactly one process applied the migrations; the other four found them applied.
      expect(outcomes.filter((o) => o.applied.length > 0)).toHaveLength(1);
      expect(outcomes.every((o) => o.version === latest)).toBe(true);
      const db = connect(target.url, target.schema ? { schema: target.schema } : {});
      try {
        expect(await migrate({ db })).toEqual({ applied: [], version: latest });
        expect(await schemaVersion({ db })).toBe(latest);
      } finally {
        await db.close();
      }
    } finally {
      await target.drop();
    }
  });

  it("prints the SQL for review, per version", async () => {
    const target = await backend.blank();
    const db = connect(target.url, target.schema ? { schema: target.schema } : {});
    try {
      const sql = migrationSql(db);
      expect(sql[0]).toMatchObject({ version: 1, name: "create_jobs" });
      expect(sql[0]!.sql).toMatch(/CREATE TABLE/);
      expect(sql.map((m) => m.version)).toEqual(Array.from({ length: latestVersion(backend.name) }, (_, i) => i + 1));
      expect(migrationSql(db, 1).map((m) => m.version)).not.toContain(1);
      expect(await schemaVersion({ db })).toBe(0);
    } finally {
      await db.close();
      await target.drop();
    }
  });
});
