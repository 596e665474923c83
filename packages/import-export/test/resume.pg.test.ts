import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createImportHandler, importPayload, type ImportProgress } from "../src/index.js";
import { rejection, withTempDir, expectTakenOver } from "./support/harness.js";
import { createJobSchema, DATABASE_URL, pgJobContext, pgPeopleImporter, readJobProgress } from "./support/pg-job.js";

const PACKAGE_DIR = fileURLToPath(new URL("../", import.meta.url));
const CHILD = fileURLToPath(new URL("./support/import-child.ts", import.meta.url));

const ROWS = 20_000;
const BATCH = 200;

/** Rows 1..ROWS; every 13th has no valid email, every 7th a note spanning two lines. */
function bigFile(): { text: string; valid: number[]; rejectedLines: number[] } {
  const lines = ["id,name,email,note"];
  const valid: number[] = [];
  const rejectedLines: number[] = [];
  let line = 2;
  for (let id = 1; id <= ROWS; id++) {
    const bad = id % 13 === 0;
    const multiline = id % 7 === 0;
    lines.push(`${id},Person ${id},${bad ? "nobody" : `p${id}@example.com`},"${multiline ? "two\nlines" : `note ${id}`}"`);
    if (bad) rejectedLines.push(line);
    else valid.push(id);
    line += multiline ? 2 : 1;
  }
  return { text: `${lines.join("\n")}\n`, valid, rejectedLines };
}

let admin: pg.Client;
const schemas: string[] = [];

async function newSchema(token: string): Promise<string> {
  const schema = `ie_test_${randomUUID().replaceAll("-", "")}`;
  schemas.push(schema);
  await createJobSchema(admin, schema, token);
  return schema;
}

// Left out when FORGE_TEST_BACKENDS does not name PostgreSQL (the test run's global setup sets
// it when the server does not answer outside CI).
const postgresOn = !process.env.FORGE_TEST_BACKENDS || process.env.FORGE_TEST_BACKENDS.split(",").includes("postgres");

beforeAll(async () => {
  if (!postgresOn) return;
  admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
});

afterAll(async () => {
  if (!postgresOn) return;
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
});

describe.skipIf(!postgresOn)("resumable import against PostgreSQL", () => {
  it("survives a SIGKILL mid-import: each row lands exactly once and the report is exact", async () => {
    await withTempDir(async (dir) => {
      const { text, valid, rejectedLines } = bigFile();
      await writeFile(path.join(dir, "people.csv"), text);
      const schema = await newSchema("worker-1");

      const child = spawn(process.execPath, ["--import", "tsx", CHILD], {
        cwd: PACKAGE_DIR,
        env: { ...process.env, SCHEMA: schema, BASE_DIR: dir, FILE: "people.csv", CLAIM_TOKEN: "worker-1", BATCH_SIZE: String(BATCH), PAUSE_MS: "25" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once("exit", (code, signal) => resolve({ code, signal })),
      );
      let early: { code: number | null } | undefined;
      void exited.then((status) => (early = status));

      // Wait for a few committed batches, as a status page would see them.
      let progress: Record<string, unknown> | null = null;
      while ((progress === null || (progress.read as number) < 3 * BATCH) && early === undefined) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        progress = await readJobProgress(admin, schema);
      }
      expect(early, `child ended before it was killed: ${stderr}`).toBeUndefined();
      child.kill("SIGKILL");
      expect((await exited).signal).toBe("SIGKILL");

      const atKill = (await readJobProgress(admin, schema)) as unknown as ImportProgress;
      expect(atKill.read).toBeLessThan(ROWS);
      const { rows: landed } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.people`);
      // The batch and its cursor committed together: what landed is exactly what the cursor says.
      expect(landed[0]!.n).toBe(atKill.imported);
      // Extrapolated from the early, shorter rows: roughly right is what a progress bar needs.
      expect(atKill.estimatedTotal).toBeGreaterThan(ROWS * 0.75);
      expect(atKill.estimatedTotal).toBeLessThan(ROWS * 1.25);

      // The retry: a new claim, the saved cursor handed back as ctx.progress.
      await admin.query(`UPDATE ${schema}.jobs SET claim_token = 'worker-2' WHERE id = 1`);
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      try {
        const handler = createImportHandler({ importers: { people: pgPeopleImporter(schema) }, baseDir: dir, batchSize: BATCH, maxErrors: ROWS });
        const ctx = pgJobContext(client, schema, 1, "worker-2", await readJobProgress(client, schema));
        const report = await handler(importPayload({ importer: "people", file: "people.csv" }), ctx);

        expect(report.read).toBe(ROWS);
        expect(report.imported).toBe(valid.length);
        expect(report.rejected).toBe(ROWS - valid.length);
        expect(report.errors.map((e) => e.line)).toEqual(rejectedLines);
        expect(report.truncatedErrors).toBeUndefined();
      } finally {
        await client.end();
      }
      const { rows: ids } = await admin.query<{ id: number }>(`SELECT id FROM ${schema}.people ORDER BY id`);
      expect(ids.map((r) => r.id)).toEqual(valid);
    });
  });

  it("fences a stale worker: once the claim token changes, its next batch never lands", async () => {
    await withTempDir(async (dir) => {
      const { text } = bigFile();
      await writeFile(path.join(dir, "people.csv"), text);
      const schema = await newSchema("worker-1");
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      try {
        const ctx = pgJobContext(client, schema, 1, "worker-1", null);
        const checkpoint = ctx.checkpoint!;
        let calls = 0;
        ctx.checkpoint = async (progress, work) => {
          const saved = await checkpoint(progress, work);
          // Between batches, the job is reclaimed and claimed again by another worker.
          if (++calls === 1) await admin.query(`UPDATE ${schema}.jobs SET claim_token = 'worker-2' WHERE id = 1`);
          return saved;
        };
        const handler = createImportHandler({ importers: { people: pgPeopleImporter(schema) }, baseDir: dir, batchSize: BATCH });
        const error = await rejection(handler(importPayload({ importer: "people", file: "people.csv" }), ctx));
        expectTakenOver(error);
        expect(calls).toBe(2);
      } finally {
        await client.end();
      }
      const progress = (await readJobProgress(admin, schema)) as unknown as ImportProgress;
      const { rows } = await admin.query<{ id: number }>(`SELECT id FROM ${schema}.people ORDER BY id`);
      expect(progress.read).toBe(BATCH);
      expect(rows).toHaveLength(progress.imported);
      expect(Math.max(...rows.map((r) => r.id))).toBeLessThanOrEqual(BATCH);
    });
  });
});
