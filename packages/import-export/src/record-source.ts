import type { CsvRecord, MalformedRecord, ParsePosition } from "./csv-reader.js";

/** Records of a file, whatever its format: what the import loop reads. */
export interface RecordSource {
  records: AsyncIterable<CsvRecord>;
  /** Set once a record could not be made sense of; reading stopped there. */
  malformed(): MalformedRecord | undefined;
  position(): ParsePosition;
  close(): void;
}

/**
 * A spreadsheet format plugged into the import and export handlers (`formats` option),
 * from its own entry point so that CSV-only users install nothing more: see
 * `@forge/import-export/xlsx`.
 */
export interface SpreadsheetFormat {
  readonly name: "xlsx";
  /** Streams the rows of one sheet (the first when `sheet` is undefined); each row is a record. */
  openSheet(path: string, sheet: string | undefined): Promise<RecordSource & { sheet: () => string | undefined }>;
  /** Writes rows to a new file at `path` (already a safe temporary path); resolves with the row count. */
  writeSheet(
    path: string,
    columns: readonly { key: string; header: string }[] | undefined,
    rows: AsyncIterable<Record<string, unknown>>,
    signal: AbortSignal,
  ): Promise<number>;
}
