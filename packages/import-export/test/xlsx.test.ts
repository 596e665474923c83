import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import ExcelJS from "exceljs";
import { describe, expect, it } from "vitest";
import {
  createExportHandler,
  createImportHandler,
  exportPayload,
  importPayload,
  type ImportProgress,
  type Importer,
  type JobContextLike,
} from "../src/index.js";
import { xlsxFormat } from "../src/xlsx.js";
import { rejection, withTempDir } from "./support/harness.js";

type Row = Record<string, string>;

function keeping(): { importer: Importer<Row>; rows: Row[] } {
  const rows: Row[] = [];
  return {
    rows,
    importer: {
      header: { required: ["email", "name"], optional: ["joined", "score"], aliases: { email: ["Email Address"] } },
      validate: (row) =>
        row.email?.includes("@") ? { ok: true, value: row } : { ok: false, errors: [{ field: "email", message: "must be an email address" }] },
      writeBatch: async (values) => void rows.push(...values),
    },
  };
}

/** A workbook as Excel writes one: shared strings, a date, a formula, rich text, two sheets. */
async function workbook(file: string): Promise<void> {
  const book = new ExcelJS.Workbook();
  const notes = book.addWorksheet("Notes");
  notes.addRow(["this sheet is not the contacts"]);
  const contacts = book.addWorksheet("Contacts");
  contacts.addRow(["Email Address", "Name", "Joined", "Score"]);
  contacts.addRow(["ann@example.com", { richText: [{ text: "Ann " }, { font: { bold: true }, text: "Lee" }] }, new Date(Date.UTC(2026, 0, 15)), 3.5]);
  contacts.addRow(["not an address", "Bob", null, { formula: "1+1", result: 2 }]);
  contacts.addRow(["cy@example.com", "Cy"]);
  await book.xlsx.writeFile(file);
}

describe("XLSX through the same importer, report and checkpoints", () => {
  it("reads a named sheet: header aliases, dates, formulas' results, rich text, short rows padded", async () => {
    await withTempDir(async (dir) => {
      await workbook(path.join(dir, "book.xlsx"));
      const { importer, rows } = keeping();
      const handler = createImportHandler({ importers: { contacts: importer }, baseDir: dir, formats: [xlsxFormat()] });
      const saved: unknown[] = [];
      const report = await handler(importPayload({ importer: "contacts", file: "book.xlsx", options: { sheet: "Contacts" }, rejectsFile: "rejects.csv" }), {
        checkpoint: async (progress, work) => {
          await work?.(undefined);
          saved.push(progress);
          return true;
        },
      });
      expect(report).toMatchObject({
        read: 3,
        imported: 2,
        rejected: 1,
        sheet: "Contacts",
        errors: [{ line: 3, field: "email", message: "must be an email address" }],
      });
      expect(rows).toEqual([
        { email: "ann@example.com", name: "Ann Lee", joined: "2026-01-15T00:00:00.000Z", score: "3.5" },
        { email: "cy@example.com", name: "Cy", joined: "", score: "" },
      ]);
      expect(saved).toHaveLength(1);
    });
  });

  it("reads the first sheet by default, and names the sheets when the one asked for is missing", async () => {
    await withTempDir(async (dir) => {
      await workbook(path.join(dir, "book.xlsx"));
      const handler = createImportHandler({ importers: { contacts: keeping().importer }, baseDir: dir, formats: [xlsxFormat()] });
      const first = await rejection(handler(importPayload({ importer: "contacts", file: "book.xlsx" })));
      expect(first.message).toMatch(/the header lacks the required columns "email", "name".*found "this sheet is not the contacts"/);
      const missing = await rejection(handler(importPayload({ importer: "contacts", file: "book.xlsx", options: { sheet: "People" } })));
      expect(missing.retryable).toBe(false);
      expect(missing.message).toBe('the workbook has no sheet named "People"; its sheets: "Notes", "Contacts"');
    });
  });

  it("a file that is not a workbook, and a handler without the format, fail at once", async () => {
    await withTempDir(async (dir) => {
      await writeFile(path.join(dir, "fake.xlsx"), "email,name\na@b.c,A\n");
      const handler = createImportHandler({ importers: { contacts: keeping().importer }, baseDir: dir, formats: [xlsxFormat()] });
      const error = await rejection(handler(importPayload({ importer: "contacts", file: "fake.xlsx" })));
      expect(error.retryable).toBe(false);
      expect(error.message).toMatch(/^the file cannot be read as XLSX: /);
      const plain = createImportHandler({ importers: { contacts: keeping().importer }, baseDir: dir });
      expect((await rejection(plain(importPayload({ importer: "contacts", file: "fake.xlsx" })))).message).toMatch(/format "xlsx" needs its reader/);
    });
  });

  it("exports to .xlsx (strings stay text, never formulas) and imports the file back", async () => {
    await withTempDir(async (dir) => {
      const people = [
        { email: "a@example.com", name: '=HYPERLINK("x")', score: 1 },
        { email: "b@example.com", name: "Bé", score: 2.25 },
      ];
      const exporter = createExportHandler({
        exporters: { people: { columns: [{ key: "email", header: "Email Address" }, "name", "score"], rows: () => people } },
        baseDir: dir,
        formats: [xlsxFormat()],
      });
      const result = await exporter(exportPayload({ exporter: "people", file: "out.xlsx" }));
      expect(result).toMatchObject({ file: "out.xlsx", rows: 2 });
      expect(result.bytes).toBeGreaterThan(0);
      const book = new ExcelJS.Workbook();
      await book.xlsx.readFile(path.join(dir, "out.xlsx"));
      const cell = book.worksheets[0]!.getCell("B2");
      expect(cell.type).toBe(ExcelJS.ValueType.String);
      const { importer, rows } = keeping();
      const report = await createImportHandler({ importers: { contacts: importer }, baseDir: dir, formats: [xlsxFormat()] })(
        importPayload({ importer: "contacts", file: "out.xlsx" }),
      );
      expect(report).toMatchObject({ read: 2, imported: 2 });
      expect(rows).toEqual([
        { email: "a@example.com", name: '=HYPERLINK("x")', score: "1" },
        { email: "b@example.com", name: "Bé", score: "2.25" },
      ]);
    });
  });

  it("resumes from the saved cursor after a worker dies mid-file: every row once, exact report, rejects file without repeats", async () => {
    await withTempDir(async (dir) => {
      // Streamed and with shared strings, as a large workbook from Excel would be.
      const book = new ExcelJS.stream.xlsx.WorkbookWriter({ filename: path.join(dir, "big.xlsx"), useSharedStrings: true });
      const sheet = book.addWorksheet("Contacts");
      sheet.addRow(["Email Address", "Name"]).commit();
      for (let i = 1; i <= 23; i++) sheet.addRow([i % 7 === 0 ? `person ${i}` : `p${i}@example.com`, `P${i}`]).commit();
      sheet.commit();
      await book.commit();

      // The queue's side: a checkpoint commits the batch's work and the progress together, or neither.
      let saved: ImportProgress | null = null;
      const written: string[] = [];
      const context = (dieOnBatch?: number): JobContextLike => {
        let batches = 0;
        return {
          progress: saved,
          checkpoint: async (progress, work) => {
            batches += 1;
            const pending: string[] = [];
            await work?.(pending);
            if (batches === dieOnBatch) throw new Error("the worker dies before the commit");
            written.push(...pending);
            saved = (typeof progress === "function" ? (progress as (r: unknown) => unknown)(undefined) : progress) as ImportProgress;
            return true;
          },
        };
      };
      const importer: Importer<Row, string[]> = {
        ...keeping().importer,
        writeBatch: async (values, tx) => void tx!.push(...values.map((v) => v.email!)),
      };
      const handler = createImportHandler({ importers: { contacts: importer }, baseDir: dir, formats: [xlsxFormat()], batchSize: 5 });
      const payload = importPayload({ importer: "contacts", file: "big.xlsx", rejectsFile: "rejects.csv" });

      await rejection(handler(payload, context(3)));
      expect(saved).toMatchObject({ line: 11, read: 10, imported: 9, rejected: 1 });
      expect(written).toHaveLength(9);

      const report = await handler(payload, context());
      expect(report).toMatchObject({ read: 23, imported: 20, rejected: 3, sheet: "Contacts" });
      const valid = Array.from({ length: 23 }, (_, i) => i + 1).filter((i) => i % 7 !== 0);
      expect(written).toEqual(valid.map((i) => `p${i}@example.com`));
      expect(await readFile(path.join(dir, "rejects.csv"), "utf8")).toBe(
        [
          "Email Address,Name,import_line,import_errors",
          "person 7,P7,8,email: must be an email address",
          "person 14,P14,15,email: must be an email address",
          "person 21,P21,22,email: must be an email address",
          "",
        ].join("\n"),
      );
    });
  });
});
