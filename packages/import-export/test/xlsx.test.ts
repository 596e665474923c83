import { writeFile } from "node:fs/promises";
import path from "node:path";
import ExcelJS from "exceljs";
import { describe, expect, it } from "vitest";
import { createExportHandler, createImportHandler, exportPayload, importPayload, type Importer } from "../src/index.js";
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
});
