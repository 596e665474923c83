import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ExcelJS from "exceljs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createImportHandler, importPayload, type ImportProgress, type SpreadsheetFormat } from "../src/index.js";
import { xlsxFormat } from "../src/xlsx.js";
import { rejection, withTempDir, expectTakenOver } from "./support/harness.js";
import { createJobSchema, DATABASE_URL, pgJobContext, pgPeopleImporter, readJobProgress } from "./support/pg-job.js";
import type { Person } from "./support/people.js";

const PACKAGE_DIR = fileURLToPath(new URL("../", import.meta.url));
const CHILD = fileURLToPath(new URL("./support/import-child.ts", import.meta.url));

const ROWS = 20_000;
const BATCH = 200;

/** Row `id` of the big file: every 13th has no valid email, every 7th a note spanning two lines. */
function person(id: number): Person {
  return {
    id,
    name: `Person ${id}`,
    email: id % 13 === 0 ? "nobody" : `p${id}@example.com`,
    note: id % 7 === 0 ? "two\nlines" : `note ${id}`,
  };
}

/** Rows 1..ROWS as CSV, with the lines the invalid ones start on. */
function bigFile(): { text: string; valid: number[]; rejectedLines: number[] } {
  const lines = ["id,name,email,note"];
  const valid: number[] = [];
  const rejectedLines: number[] = [];
  let line = 2;
  for (let id = 1; id <= ROWS; id++) {
    const p = person(id);
    lines.push(`${id},${p.name},${p.email},"${p.note}"`);
    if (p.email === "nobody") rejectedLines.push(line);
    else valid.push(id);
    line += p.note.includes("\n") ? 2 : 1;
  }
  return { text: `${lines.join("\n")}\n`, valid, rejectedLines };
}

/**
 * The same rows as a workbook, streamed with shared strings as Excel writes a large one: ids
 * are number cells, and a row is one line (its sheet row number) whatever its cells hold.
 */
async function bigWorkbook(file: string): Promise<{ valid: number[]; rejectedLines: number[] }> {
  const book = new ExcelJS.stream.xlsx.WorkbookWriter({ filename: file, useSharedStrings: true });
  const sheet = book.addWorksheet("People");
  sheet.addRow(["id", "name", "email", "note"]).commit();
  const valid: number[] = [];
  const rejectedLines: number[] = [];
  for (let id = 1; id <= ROWS; id++) {
    const p = person(id);
    sheet.addRow([p.id, p.name, p.email, p.note]).commit();
    if (p.email === "nobody") rejectedLines.push(id + 1);
    else valid.push(id);
  }
  sheet.commit();
  await book.commit();
  return { valid, rejectedLines };
}

let admin: pg.Client;
const schemas: string[] = [];

async function newSchema(token: string): Promise<string> {
  const schema = `ie_test_${randomUUID().replaceAll("-", "")}`;
  schemas.push(schema);
  await createJobSchema(admin, schema, token);
  return schema;
}

/**
 * Runs the import in a worker process (import-child.ts) against the job's row, waits for a few
 * committed batches, as a status page would see them, and SIGKILLs it.
 */
async function killMidImport(schema: string, dir: string, file: string, format?: "xlsx"): Promise<void> {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD], {
    cwd: PACKAGE_DIR,
    env: {
      ...process.env,
      SCHEMA: schema,
      BASE_DIR: dir,
      FILE: file,
      CLAIM_TOKEN: "worker-1",
      BATCH_SIZE: String(BATCH),
      PAUSE_MS: "25",
      ...(format === undefined ? {} : { FORMAT: format }),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  let early: { code: number | null } | undefined;
  void exited.then((status) => (early = status));

  let progress: Record<string, unknown> | null = null;
  while ((progress === null || (progress.read as number) < 3 * BATCH) && early === undefined) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    progress = await readJobProgress(admin, schema);
  }
  expect(early, `child ended before it was killed: ${stderr}`).toBeUndefined();
  child.kill("SIGKILL");
  expect((await exited).signal).toBe("SIGKILL");
}

/**
 * The retry: a new claim (worker-2), the saved cursor handed back as ctx.progress, and the
 * ids the resumed run writes, in order.
 */
async function resumeAsWorker2(schema: string, dir: string, file: string, formats?: SpreadsheetFormat[]) {
  await admin.query(`UPDATE ${schema}.jobs SET claim_token = 'worker-2' WHERE id = 1`);
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const people = pgPeopleImporter(schema);
    const written: number[] = [];
    const importer: typeof people = {
      ...people,
      writeBatch: (values, tx) => {
        written.push(...values.map((v) => v.id));
        return people.writeBatch(values, tx);
      },
    };
    const handler = createImportHandler({ importers: { people: importer }, baseDir: dir, batchSize: BATCH, maxErrors: ROWS, formats });
    const ctx = pgJobContext(client, schema, 1, "worker-2", await readJobProgress(client, schema));
    const report = await handler(importPayload({ importer: "people", file }), ctx);
    return { report, written };
  } finally {
    await client.end();
  }
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

      await killMidImport(schema, dir, "people.csv");

      const atKill = (await readJobProgress(admin, schema)) as unknown as ImportProgress;
      expect(atKill.read).toBeLessThan(ROWS);
      const { rows: landed } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.people`);
      // The batch and its cursor committed together: what landed is exactly what the cursor says.
      expect(landed[0]!.n).toBe(atKill.imported);
      // Extrapolated from the early, shorter rows: roughly right is what a progress bar needs.
      expect(atKill.estimatedTotal).toBeGreaterThan(ROWS * 0.75);
      expect(atKill.estimatedTotal).toBeLessThan(ROWS * 1.25);

      const { report } = await resumeAsWorker2(schema, dir, "people.csv");
      expect(report.read).toBe(ROWS);
      expect(report.imported).toBe(valid.length);
      expect(report.rejected).toBe(ROWS - valid.length);
      expect(report.errors.map((e) => e.line)).toEqual(rejectedLines);
      expect(report.truncatedErrors).toBeUndefined();
      const { rows: ids } = await admin.query<{ id: number }>(`SELECT id FROM ${schema}.people ORDER BY id`);
      expect(ids.map((r) => r.id)).toEqual(valid);
    });
  });

  it("an XLSX import survives a SIGKILL mid-import too: resumed from its checkpoint, each row once, exact report", async () => {
    await withTempDir(async (dir) => {
      const { valid, rejectedLines } = await bigWorkbook(path.join(dir, "people.xlsx"));
      const schema = await newSchema("worker-1");

      await killMidImport(schema, dir, "people.xlsx", "xlsx");

      const atKill = (await readJobProgress(admin, schema)) as unknown as ImportProgress;
      expect(atKill.read).toBeGreaterThanOrEqual(3 * BATCH);
      expect(atKill.read).toBeLessThan(ROWS);
      // The cursor is the sheet's row number: the header is row 1, each record one row.
      expect(atKill.line).toBe(atKill.read + 1);
      // The batch and its cursor committed together: what landed is exactly the rows up to the cursor.
      const landed = valid.filter((id) => id + 1 <= atKill.line);
      const { rows: before } = await admin.query<{ id: number }>(`SELECT id FROM ${schema}.people ORDER BY id`);
      expect(before.map((r) => r.id)).toEqual(landed);
      expect(atKill.imported).toBe(landed.length);

      // Plain INSERTs (pgPeopleImporter): a row written a second time would fail its batch on the primary key.
      const { report, written } = await resumeAsWorker2(schema, dir, "people.xlsx", [xlsxFormat()]);
      // The resumed worker starts on the first row after the cursor, not at the top of the sheet.
      expect(written[0]).toBe(valid[landed.length]);
      expect(written).toEqual(valid.slice(landed.length));
      expect(report).toMatchObject({ read: ROWS, imported: valid.length, rejected: ROWS - valid.length, sheet: "People" });
      expect(report.errors.map((e) => e.line)).toEqual(rejectedLines);
      expect(report.truncatedErrors).toBeUndefined();

      const { rows: after } = await admin.query<{ id: number; note: string }>(`SELECT id, note FROM ${schema}.people ORDER BY id`);
      expect(after.map((r) => r.id)).toEqual(valid);
      expect(after.find((r) => r.id === 7)?.note).toBe("two\nlines");
      expect(await readJobProgress(admin, schema)).toMatchObject({ read: ROWS, imported: valid.length, line: ROWS + 1 });
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
