import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { connect, latestVersion, migrate, type JobsDatabase } from "../../src/index.js";
import { backends } from "../helpers/backends.js";

const run = promisify(execFile);
const tsx = createRequire(import.meta.url).resolve("tsx");
const script = fileURLToPath(new URL("../fixtures/migrate.ts", import.meta.url));

/** What the schema is made of, read from the database's catalogue. */
const SCHEMA: Record<"sqlite" | "mysql", (db: JobsDatabase) => Promise<unknown>> = {
  sqlite: async (db) => ({
    objects: (await db.executor.query("SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")).rows,
    journal: (await db.executor.query("PRAGMA journal_mode")).rows,
  }),
  mysql: async (db) => ({
    tables: (await db.executor.query("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1", [db.schema])).rows,
    indexes: (
      await db.executor.query(
        "SELECT index_name AS name, non_unique, GROUP_CONCAT(column_name ORDER BY seq_in_index) AS columns FROM information_schema.statistics WHERE table_schema = $1 AND table_name = 'jobs' GROUP BY index_name, non_unique ORDER BY 1",
        [db.schema],
      )
    ).rows,
  }),
};

for (const backend of backends().filter((b): b is typeof b & { name: "sqlite" | "mysql" } => b.name !== "postgres")) {
  describe(`migrate from 5 processes at once on a database that does not exist yet (${backend.name})`, () => {
    it("ends with one schema, one record per version and no error; migrating again changes nothing", async () => {
      const target = await backend.blank();
      try {
        const results = await Promise.all(
          Array.from({ length: 5 }, () => run(process.execPath, ["--import", tsx, script, target.url, target.schema ?? ""], { timeout: 60_000 })),
        );
        expect(results.map((r) => r.stderr)).toEqual(["", "", "", "", ""]);
        const outcomes = results.map((r) => JSON.parse(r.stdout) as { applied: number[] });
        const versions = Array.from({ length: latestVersion(backend.name) }, (_, i) => i + 1);
        // One process applied every version; the four others found them applied.
        expect(outcomes.flatMap((o) => o.applied)).toEqual(versions);

        const db = connect(target.url, target.schema ? { schema: target.schema } : {});
        try {
          const schema = await SCHEMA[backend.name](db);
          const records = (await db.executor.query<{ version: number }>(`SELECT version FROM ${db.migrationsTable} ORDER BY version`)).rows;
          expect(records.map((r) => Number(r.version))).toEqual(versions);
          if (backend.name === "sqlite") {
            expect(schema).toMatchObject({ journal: [{ journal_mode: "wal" }] });
            const names = (schema as { objects: { name: string }[] }).objects.map((o) => o.name);
            expect(names.filter((n) => n === "jobs")).toHaveLength(1);
            expect(names).toEqual(expect.arrayContaining(["jobs_idempotency_key", "jobs_dedup_key_active", "jobs_flow_claim"]));
          } else {
            const { tables, indexes } = schema as { tables: { name: string }[]; indexes: { name: string; non_unique: number; columns: string }[] };
            expect(tables.map((t) => t.name)).toEqual([
              "forge_jobs_migrations",
              "jobs",
              "jobs_attempts",
              "jobs_batches",
              "jobs_counts",
              "jobs_debounce",
              "jobs_dependencies",
              "jobs_events",
              "jobs_event_locks",
              "jobs_groups",
              "jobs_history",
              "jobs_keys",
              "jobs_limits",
              "jobs_minutes",
              "jobs_progress",
              "jobs_queues",
              "jobs_schedules",
              "jobs_sequences",
              "jobs_steps",
              "jobs_waits",
              "jobs_workers",
            ]);
            expect(indexes).toEqual(
              expect.arrayContaining([
                { name: "jobs_idempotency_key", non_unique: 0, columns: "idempotency_key" },
                { name: "jobs_dedup_key_active", non_unique: 0, columns: "dedup_active" },
              ]),
            );
          }
          expect(await migrate({ db })).toEqual({ applied: [], version: latestVersion(backend.name) });
          expect(await migrate({ db })).toEqual({ applied: [], version: latestVersion(backend.name) });
          expect(await SCHEMA[backend.name](db)).toEqual(schema);
        } finally {
          await db.close();
        }
      } finally {
        await target.drop();
      }
    });
  });
}
