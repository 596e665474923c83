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

  /** The place itself (schema or database) exists, as when the application made it: migrate() would create it. */
  async function place(db: ReturnType<typeof connect>, schema: string | undefined): Promise<void> {
    if (schema && backend.name === "postgres") await db.executor.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    if (schema && backend.name === "mysql") await db.executor.query(`CREATE DATABASE IF NOT EXISTS \`${schema}\``);
  }

  it("the SQL of forge-jobs init, applied by another tool, records its versions: migrate then applies nothing (issue 16.6)", async () => {
    const target = await backend.blank();
    const db = connect(target.url, target.schema ? { schema: target.schema } : {});
    try {
      await place(db, target.schema);
      for (const migration of migrationSql(db))
        for (const statement of migration.sql.split(/;\n\n/)) if (statement.trim()) await db.executor.query(statement.replace(/;\s*$/, ""));
      expect(await schemaVersion({ db })).toBe(latestVersion(backend.name));
      expect(await migrate({ db })).toEqual({ applied: [], version: latestVersion(backend.name) });
    } finally {
      await db.close();
      await target.drop();
    }
  });

  it("a jobs table of the application's own: migrate says to give the queue a schema of its own, and changes nothing (issue 16.7)", async () => {
    const target = await backend.blank();
    const db = connect(target.url, target.schema ? { schema: target.schema } : {});
    try {
      await place(db, target.schema);
      await db.executor.query(`CREATE TABLE ${db.table} (id integer PRIMARY KEY, title text)`);
      const error = await migrate({ db }).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(error?.name).toBe("JobError");
      expect(error?.message).toMatch(
        /a table named "jobs" already exists in .* and forge-jobs did not create it.*schema of its own: connect\(url, \{ schema: "forge" \}\)/,
      );
      expect(await schemaVersion({ db })).toBe(0);
      const missing = await db.executor.query(`SELECT version FROM ${db.migrationsTable}`).then(
        () => false,
        () => true,
      );
      expect(missing, "the migrations table was not created").toBe(true);
    } finally {
      await db.close();
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
