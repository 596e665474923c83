import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stat } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { filler, rowXml, SHEET_CLOSE, SHEET_OPEN, workbookParts, writeZip, type Part } from "./support/xlsx-zip.js";
import { withTempDir } from "./support/harness.js";

const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const CHILD = fileURLToPath(new URL("./support/xlsx-import-child.ts", import.meta.url));
const GIB = 1024 ** 3;

interface Outcome {
  report?: Record<string, unknown>;
  rows?: number;
  error?: { message: string; retryable: unknown };
  rssBeforeMB: number;
  rssPeakMB: number;
}

/** Imports `file` in a worker process whose heap is bounded, as a production worker's is; the child must exit normally. */
async function importInChild(dir: string, file: string, xlsxOptions?: Record<string, unknown>): Promise<Outcome> {
  const child = spawn(process.execPath, ["--max-old-space-size=256", "--import", "tsx", CHILD], {
    cwd: PACKAGE_DIR,
    env: { ...process.env, BASE_DIR: dir, FILE: file, ...(xlsxOptions ? { XLSX_OPTIONS: JSON.stringify(xlsxOptions) } : {}) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const status = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  expect(status, `the worker process died: ${stderr.slice(-2000)}`).toEqual({ code: 0, signal: null });
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as Outcome;
}

/** A sheet whose header row is one cell of `bytes` bytes: one megabyte of zip, `bytes` of XML. */
function oneHugeCell(bytes: number): Part {
  return function* () {
    yield Buffer.from(`${SHEET_OPEN}<row r="1"><c r="A1" t="inlineStr"><is><t>`);
    yield* filler(bytes);
    yield Buffer.from(`</t></is></c></row>${SHEET_CLOSE}`);
  };
}

describe("XLSX zip bombs fail the job at once, without taking the worker down", () => {
  it("a sheet whose one cell inflates to 1 GiB: the row cap (8 MiB, as for a CSV record) fails the job, not retryable", async () => {
    await withTempDir(async (dir) => {
      await writeZip(path.join(dir, "bomb.xlsx"), workbookParts(oneHugeCell(GIB)));
      expect((await stat(path.join(dir, "bomb.xlsx"))).size).toBeLessThan(2 * 1024 * 1024);
      const outcome = await importInChild(dir, "bomb.xlsx");
      expect(outcome.error, JSON.stringify(outcome)).toEqual({
        message: expect.stringMatching(/^the file cannot be imported as XLSX: row 1 of "xl\/worksheets\/sheet1\.xml" is larger than 8 MiB/),
        retryable: false,
      });
      expect(outcome.error!.message).toMatch(/MAX_RECORD_BYTES/);
    });
  });

  it("the same cell stored before the workbook's other parts (exceljs sets such a sheet aside in a file first)", async () => {
    await withTempDir(async (dir) => {
      await writeZip(path.join(dir, "bomb.xlsx"), workbookParts(oneHugeCell(GIB), { sheetFirst: true }));
      const outcome = await importInChild(dir, "bomb.xlsx");
      expect(outcome.error, JSON.stringify(outcome)).toEqual({
        message: expect.stringMatching(/row 1 of "xl\/worksheets\/sheet1\.xml" is larger than 8 MiB/),
        retryable: false,
      });
    });
  });

  it("a shared string that inflates to 1 GiB: the same cap, on the table's entry", async () => {
    await withTempDir(async (dir) => {
      const sharedStrings: Part = function* () {
        yield Buffer.from(
          '<?xml version="1.0" encoding="UTF-8"?>\n<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" uniqueCount="1"><si><t>',
        );
        yield* filler(GIB);
        yield Buffer.from("</t></si></sst>");
      };
      const sheet = `${SHEET_OPEN}<row r="1"><c r="A1" t="s"><v>0</v></c></row>${SHEET_CLOSE}`;
      await writeZip(path.join(dir, "bomb.xlsx"), workbookParts(sheet, { sharedStrings }));
      const outcome = await importInChild(dir, "bomb.xlsx");
      expect(outcome.error, JSON.stringify(outcome)).toEqual({
        message: expect.stringMatching(/^the file cannot be imported as XLSX: text 1 of "xl\/sharedStrings\.xml" is larger than 8 MiB/),
        retryable: false,
      });
    });
  });

  it("a sheet larger than maxEntryBytes once inflated fails with a message naming the option; a normal workbook imports", async () => {
    await withTempDir(async (dir) => {
      const rows = Array.from({ length: 2000 }, (_, i) => rowXml(i + 2, [`p${i}@example.com`, `Person ${i}`]));
      const sheet = `${SHEET_OPEN}${rowXml(1, ["email", "name"])}${rows.join("")}${SHEET_CLOSE}`;
      await writeZip(path.join(dir, "people.xlsx"), workbookParts(sheet));

      const normal = await importInChild(dir, "people.xlsx");
      expect(normal.report, JSON.stringify(normal)).toMatchObject({ read: 2000, imported: 2000, rejected: 0, sheet: "Sheet1" });

      const capped = await importInChild(dir, "people.xlsx", { maxEntryBytes: 64 * 1024 });
      expect(capped.error, JSON.stringify(capped)).toEqual({
        message: expect.stringMatching(
          /^the file cannot be imported as XLSX: "xl\/worksheets\/sheet1\.xml" inflates to more than 65536 bytes \(maxEntryBytes\).*xlsxFormat\(\{ maxEntryBytes \}\)/,
        ),
        retryable: false,
      });
    });
  });
});
