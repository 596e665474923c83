/** One record of a file (a CSV record, a spreadsheet row). */
export interface CsvRecord {
  fields: string[];
  /** 1-based line on which the record starts. */
  line: number;
  /** Line on which it ends: later than `line` when a quoted field holds line breaks. */
  endLine: number;
  /** Set when the record cannot be imported whatever its fields say (bytes that are not text): it is rejected with this message. */
  problem?: string;
}

/** Where the parser is, which runs a little ahead of the records handed out. */
export interface ParsePosition {
  bytes: number;
  /** Records parsed so far, header and empty lines included. */
  records: number;
}

export interface MalformedRecord {
  line: number;
  message: string;
}

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
