import { once, type EventEmitter } from "node:events";
import { createReadStream } from "node:fs";
import ExcelJS from "exceljs";
import { ImportError, messageOf } from "./errors.js";
import type { CsvRecord, RecordSource, SpreadsheetFormat } from "./record-source.js";
import { SharedStrings } from "./shared-strings.js";
import { DEFAULT_MAX_ENTRY_BYTES, guardZip, type XlsxLimits } from "./xlsx-guard.js";

/**
 * `@forge/import-export/xlsx`: Excel workbooks through the same importers, report and
 * checkpoints as CSV, and exports to `.xlsx`. exceljs is an optional peer dependency: only
 * applications that import this entry point install it.
 */

type Cell = ExcelJS.CellValue;

/** What a cell shows, as the text a CSV of the sheet would hold. */
export function cellText(value: Cell): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (value instanceof Date) return value.toISOString();
  if ("richText" in value) return value.richText.map((part) => part.text).join("");
  if ("error" in value) return value.error;
  if ("formula" in value || "sharedFormula" in value) return cellText((value as { result?: Cell }).result ?? null);
  if ("text" in value) return cellText(value.text as Cell);
  return "";
}

interface SheetNames {
  model?: { sheets?: Array<{ name: string; rId: string }> };
  workbookRels?: Array<{ Id: string; Target: string }>;
}

// The streaming reader names sheets "Sheet<n>" after their file; the real name is in the
// workbook's own list, reached through its relationships.
function sheetName(workbook: SheetNames, reader: { id: number | string; name: string }): { name: string; index: number } {
  const rel = workbook.workbookRels?.find((r) => r.Target.replace(/^\/?xl\//, "") === `worksheets/sheet${reader.id}.xml`);
  const sheets = workbook.model?.sheets ?? [];
  const index = rel === undefined ? -1 : sheets.findIndex((s) => s.rId === rel.Id);
  return index === -1 ? { name: reader.name, index: Number(reader.id) - 1 } : { name: sheets[index]!.name, index };
}

/** A failure that may come while exceljs waits on a stream that will never end: it ends the wait. */
interface Failure {
  error: ImportError | undefined;
  failed: Promise<never>;
}

/** `iterable`, unless the failure comes first. */
async function* until<T>(iterable: AsyncIterable<T>, failure: Failure): AsyncGenerator<T> {
  const iterator = iterable[Symbol.asyncIterator]();
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), failure.failed]);
      if (next.done === true) return;
      yield next.value;
    }
  } finally {
    // A consumer that stops early lets the reader clean up; after a failure it may never answer.
    if (failure.error === undefined) await iterator.return?.();
  }
}

function openSheet(path: string, wanted: string | undefined, limits: XlsxLimits): RecordSource & { sheet(): string | undefined } {
  const input = createReadStream(path);
  let rows = 0;
  let chosen: string | undefined;
  let fail: (error: ImportError) => void = () => undefined;
  const failure: Failure = { error: undefined, failed: new Promise<never>((_, reject) => (fail = reject)) };
  failure.failed.catch(() => undefined);
  const guard = guardZip(input, limits, (error) => {
    failure.error ??= error;
    fail(error);
    input.destroy();
  });

  // Made when a workbook has a shared-string table (the exporter's own workbooks have none).
  let strings: SharedStrings | undefined;

  async function* records(): AsyncGenerator<CsvRecord> {
    const seen: string[] = [];
    const workbook = new ExcelJS.stream.xlsx.WorkbookReader(input, {
      sharedStrings: "cache",
      styles: "cache", // dates are numbers with a date style: without styles they would read as numbers
      hyperlinks: "ignore",
      worksheets: "emit",
      entries: "ignore",
    });
    // The reader sets `sharedStrings = []` when the table starts and reads `sharedStrings[i]` for
    // each cell: hand it the table on disk instead. Undefined until then, as the reader expects
    // (a sheet stored before the table is set aside until the table is read).
    let table: unknown[] | undefined;
    Object.defineProperty(workbook, "sharedStrings", {
      configurable: true,
      get: () => table,
      set: () => void (table = (strings ??= new SharedStrings()).asArray()),
    });
    let width: number | undefined;
    try {
      for await (const worksheet of until(workbook, failure)) {
        if (!guard.engaged()) throw new Error("the size limits on the zip's entries could not be applied (has exceljs or unzipper changed?)");
        const { name } = sheetName(workbook as unknown as SheetNames, worksheet as unknown as { id: number; name: string });
        seen.push(name);
        if (chosen !== undefined || (wanted !== undefined && name !== wanted)) {
          // A sheet left unread stalls the zip stream under it: drain it.
          for await (const _ of until(worksheet, failure)) void _;
          continue;
        }
        chosen = name;
        for await (const row of until(worksheet, failure)) {
          const values = row.values as Cell[];
          // Trailing empty cells are not stored in a sheet: pad to the header's width.
          const fields = Array.from({ length: Math.max(values.length - 1, width ?? 0) }, (_, i) => cellText(values[i + 1]));
          width ??= fields.length;
          rows += 1;
          yield { fields, line: row.number, endLine: row.number };
        }
      }
    } catch (error) {
      throw failure.error ?? new ImportError(`the file cannot be read as XLSX: ${messageOf(error)}`, { retryable: false, cause: error });
    } finally {
      strings?.close();
    }
    if (chosen === undefined) {
      throw new ImportError(`the workbook has no sheet named "${wanted}"; its sheets: ${seen.map((s) => JSON.stringify(s)).join(", ")}`, { retryable: false });
    }
  }

  return {
    records: records(),
    malformed: () => undefined,
    // bytesRead, not a "data" listener: one would start the stream flowing before exceljs pipes it.
    position: () => ({ bytes: input.bytesRead, records: rows }),
    close: () => {
      input.destroy();
      strings?.close();
    },
    sheet: () => chosen,
  };
}

function plain(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "string" || value instanceof Date) return value;
  if (typeof value === "bigint") return value.toString();
  return JSON.stringify(value);
}

/** The stream exceljs pipes a sheet's XML into (archiver's entry), as far as this file relies on it. */
interface PipedSheet {
  stream?: { pipes?: Array<EventEmitter & { _writableState?: { needDrain?: boolean } }> };
}

/**
 * exceljs writes a committed row into the zip entry without heeding backpressure, so a fast
 * source piles the sheet's XML up in memory ahead of the compressor; waiting for the entry's
 * drain keeps an export at flat memory. Reached through exceljs internals: if they change,
 * the export still works, only without the wait.
 */
async function zipCaughtUp(sheet: unknown, signal: AbortSignal): Promise<void> {
  const entry = (sheet as PipedSheet).stream?.pipes?.[0];
  if (entry?._writableState?.needDrain) await once(entry, "drain", { signal });
}

async function writeSheet(
  path: string,
  columns: readonly { key: string; header: string }[] | undefined,
  rows: AsyncIterable<Record<string, unknown>>,
  signal: AbortSignal,
): Promise<number> {
  // Inline strings, no styles: a million-row export keeps nothing in memory but the current row.
  const workbook = new ExcelJS.stream.xlsx.WorkbookWriter({ filename: path, useSharedStrings: false, useStyles: false });
  const sheet = workbook.addWorksheet("Sheet1");
  let cols = columns;
  let count = 0;
  for await (const row of rows) {
    signal.throwIfAborted();
    cols ??= Object.keys(row).map((key) => ({ key, header: key }));
    if (count === 0) sheet.addRow(cols.map((c) => c.header)).commit();
    // A string stays a string cell: unlike CSV, "=1+1" in a cell is text, never a formula.
    sheet.addRow(cols.map((c) => plain(row[c.key]))).commit();
    count += 1;
    await zipCaughtUp(sheet, signal);
  }
  if (count === 0 && cols !== undefined) sheet.addRow(cols.map((c) => c.header)).commit();
  sheet.commit();
  await workbook.commit();
  return count;
}

export interface XlsxFormatOptions {
  /**
   * Bytes one entry of the zip (a sheet, the shared-string table) may inflate to before the
   * import fails; 1 GiB by default. A row or a text is capped at 8 MiB besides, whatever this says.
   */
  maxEntryBytes?: number;
}

/** The XLSX format for `createImportHandler({ formats })` and `createExportHandler({ formats })`. */
export function xlsxFormat(options: XlsxFormatOptions = {}): SpreadsheetFormat {
  const maxEntryBytes = options.maxEntryBytes ?? DEFAULT_MAX_ENTRY_BYTES;
  if (!Number.isSafeInteger(maxEntryBytes) || maxEntryBytes < 1) throw new TypeError(`maxEntryBytes must be an integer >= 1, got ${maxEntryBytes}`);
  return {
    name: "xlsx",
    openSheet: async (path, sheet) => openSheet(path, sheet, { maxEntryBytes }),
    writeSheet,
  };
}
