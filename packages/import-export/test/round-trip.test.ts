import { copyFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  createExportHandler,
  createImportHandler,
  exportPayload,
  importPayload,
  type ExportOptions,
  type ImportOptionsInput,
  type Importer,
} from "../src/index.js";
import { FIXTURES } from "./support/people.js";
import { withTempDir } from "./support/harness.js";

type Row = Record<string, string>;

async function importRows(baseDir: string, file: string, options: ImportOptionsInput = {}): Promise<Row[]> {
  const rows: Row[] = [];
  const raw: Importer<Row> = {
    validate: (row) => ({ ok: true, value: row }),
    async writeBatch(values) {
      rows.push(...values);
    },
  };
  const report = await createImportHandler({ importers: { raw }, baseDir })(importPayload({ importer: "raw", file, options }));
  expect(report.rejected).toBe(0);
  return rows;
}

async function exportRows(baseDir: string, file: string, rows: Row[], options: Partial<ExportOptions>) {
  const handler = createExportHandler({ exporters: { rows: { rows: () => rows } }, baseDir });
  return handler(exportPayload({ exporter: "rows", file, options }));
}

describe("import, export, import", () => {
  it.each([
    ["people.csv", {}, {}],
    ["lines-crlf.csv", {}, { recordDelimiter: "\r\n" }],
    ["semicolon.csv", { delimiter: ";" }, { delimiter: ";" }],
    ["latin1.csv", { encoding: "latin1" }, { bom: true }],
    ["formulas.csv", {}, { escapeFormulas: false }],
  ] as const)("gives back the same rows for %s", async (fixture, importOptions, exportOptions) => {
    await withTempDir(async (dir) => {
      await copyFile(path.join(FIXTURES, fixture), path.join(dir, fixture));
      const first = await importRows(dir, fixture, importOptions);
      expect(first.length).toBeGreaterThan(0);
      const result = await exportRows(dir, "again.csv", first, exportOptions);
      expect(result.rows).toBe(first.length);
      const second = await importRows(dir, "again.csv", "delimiter" in exportOptions ? { delimiter: exportOptions.delimiter } : {});
      expect(second).toEqual(first);
    });
  });

  it("keeps formulas inert by default, which a re-import then sees as quoted text", async () => {
    await withTempDir(async (dir) => {
      await copyFile(path.join(FIXTURES, "formulas.csv"), path.join(dir, "formulas.csv"));
      const first = await importRows(dir, "formulas.csv");
      await exportRows(dir, "again.csv", first, {});
      const second = await importRows(dir, "again.csv");
      expect(second[0]).toEqual({ id: "1", name: `'=HYPERLINK("http://evil.example")`, email: "a@example.com", note: "'-5" });
      expect(second[1]).toEqual({ id: "2", name: "'+cmd", email: "b@example.com", note: "'@SUM(A1)" });
    });
  });
});
