import { ExportError, ImportError, type JobErrorClass } from "./errors.js";
import { IMPORT_ENCODINGS, type ImportEncoding } from "./sniff.js";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export type { ImportEncoding } from "./sniff.js";

/** File formats: CSV is built in; the others need their entry point's reader (`formats` option). */
export type ImportFileFormat = "csv" | "xlsx";

/** Every option spelled out, defaults included, so a queued job keeps its meaning across upgrades. */
export interface ImportOptions {
  /** One character, or `"auto"`: the one of `,` `;` tab `|` that splits the first lines evenly. */
  delimiter: string;
  /** The first record names the columns (ignored in favour of `columns` when both are given). */
  header: boolean;
  columns?: string[];
  quote: string;
  escape: string;
  /** `auto`: a byte order mark, else UTF-8 when the start of the file is valid UTF-8, else Windows-1252. */
  encoding: ImportEncoding;
  skipEmptyLines: boolean;
  /** False: a record with the wrong number of fields is a rejected row. True: padded or cut. */
  relaxColumnCount: boolean;
  /** Spreadsheet formats: the sheet to read; the first one when absent. */
  sheet?: string;
}

export interface ImportOptionsInput {
  delimiter?: string;
  header?: boolean;
  columns?: readonly string[];
  quote?: string;
  escape?: string;
  encoding?: ImportEncoding | "utf-8";
  skipEmptyLines?: boolean;
  relaxColumnCount?: boolean;
  sheet?: string;
}

export interface ImportPayload {
  importer: string;
  /** Relative to the handler's `baseDir`. */
  file: string;
  format: ImportFileFormat;
  options: ImportOptions;
  /** Validate every row and run the writes in a transaction that is rolled back: the report of an import that did not happen. */
  dryRun: boolean;
  /** Where to write the rejected rows as a CSV to fix and upload again (relative to baseDir). */
  rejectsFile?: string;
}

export interface ImportPayloadInput {
  importer: string;
  file: string;
  /** Default: `"xlsx"` when the file name ends in `.xlsx`, else `"csv"`. */
  format?: ImportFileFormat;
  options?: ImportOptionsInput;
  dryRun?: boolean;
  rejectsFile?: string;
}

export interface ExportOptions {
  delimiter: string;
  header: boolean;
  /** Prefix a UTF-8 byte order mark, which some spreadsheet programs need to read UTF-8. */
  bom: boolean;
  /** Neutralise spreadsheet formulas (see formula.ts); turn off for machine consumers. */
  escapeFormulas: boolean;
  recordDelimiter: "\n" | "\r\n";
}

export interface ExportPayload {
  exporter: string;
  /** Relative to the handler's `baseDir`. */
  file: string;
  format: ImportFileFormat;
  params?: JsonValue;
  options: ExportOptions;
}

export interface ExportPayloadInput {
  exporter: string;
  file: string;
  /** Default: `"xlsx"` when the file name ends in `.xlsx`, else `"csv"`. */
  format?: ImportFileFormat;
  params?: JsonValue;
  options?: Partial<ExportOptions>;
}

const LINE_BREAK = /[\r\n]/;

/** Reads untrusted payload data; every failure is final, since a retry sees the same payload. */
class PayloadReader {
  constructor(
    private readonly Class: JobErrorClass,
    private readonly what: string,
  ) {}

  fail(path: string, problem: string): never {
    throw new this.Class(`${this.what}: ${path} ${problem}`, { retryable: false });
  }

  object(value: unknown, path: string, keys: readonly string[]): Record<string, unknown> {
    if (!isPlainObject(value)) this.fail(path, "must be an object");
    for (const key of Object.keys(value)) {
      if (!keys.includes(key)) this.fail(path, `has an unknown key "${key}" (known: ${keys.join(", ")})`);
    }
    return value;
  }

  name(value: unknown, path: string): string {
    if (typeof value !== "string" || value.trim() === "") this.fail(path, "must be a non-empty string");
    return value;
  }

  file(value: unknown, path: string): string {
    const file = this.name(value, path);
    if (file.includes("\0")) this.fail(path, "must not contain a NUL character");
    return file;
  }

  char(value: unknown, path: string, fallback: string): string {
    if (value === undefined) return fallback;
    if (typeof value !== "string" || value.length !== 1 || LINE_BREAK.test(value)) {
      this.fail(path, "must be a single character other than CR or LF");
    }
    return value;
  }

  boolean(value: unknown, path: string, fallback: boolean): boolean {
    if (value === undefined) return fallback;
    if (typeof value !== "boolean") this.fail(path, "must be a boolean");
    return value;
  }

  /** The payload's `format`; by default the file name's (`.xlsx`, else CSV). */
  fileFormat(value: unknown, file: string): ImportFileFormat {
    return this.oneOf(value, "format", ["csv", "xlsx"], /\.xlsx$/i.test(file) ? "xlsx" : "csv");
  }

  oneOf<T extends string>(value: unknown, path: string, allowed: readonly T[], fallback: T): T {
    if (value === undefined) return fallback;
    if (!allowed.includes(value as T)) this.fail(path, `must be one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}`);
    return value as T;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function isJson(value: unknown, depth = 0): value is JsonValue {
  if (depth > 64) return false;
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((item) => isJson(item, depth + 1));
  return isPlainObject(value) && Object.values(value).every((item) => isJson(item, depth + 1));
}

const IMPORT_KEYS = ["importer", "file", "format", "options", "dryRun", "rejectsFile"] as const;
const IMPORT_OPTION_KEYS = ["delimiter", "header", "columns", "quote", "escape", "encoding", "skipEmptyLines", "relaxColumnCount", "sheet"] as const;

function readImportOptions(read: PayloadReader, value: unknown): ImportOptions {
  const raw = read.object(value ?? {}, "options", IMPORT_OPTION_KEYS);
  const delimiter = raw.delimiter === "auto" ? "auto" : read.char(raw.delimiter, "options.delimiter", "auto");
  const quote = read.char(raw.quote, "options.quote", '"');
  if (delimiter === quote) read.fail("options.delimiter", "must differ from options.quote");
  const header = read.boolean(raw.header, "options.header", true);
  const encoding = read.oneOf(raw.encoding, "options.encoding", [...IMPORT_ENCODINGS, "utf-8"], "auto");
  const options: ImportOptions = {
    delimiter,
    header,
    quote,
    escape: read.char(raw.escape, "options.escape", quote),
    encoding: encoding === "utf-8" ? "utf8" : encoding,
    skipEmptyLines: read.boolean(raw.skipEmptyLines, "options.skipEmptyLines", true),
    relaxColumnCount: read.boolean(raw.relaxColumnCount, "options.relaxColumnCount", false),
  };
  if (raw.sheet !== undefined) options.sheet = read.name(raw.sheet, "options.sheet");
  if (raw.columns !== undefined) {
    const columns = raw.columns;
    if (!Array.isArray(columns) || columns.length === 0) read.fail("options.columns", "must be a non-empty array of names");
    columns.forEach((column, i) => read.name(column, `options.columns[${i}]`));
    if (new Set(columns).size !== columns.length) read.fail("options.columns", "must not repeat a name");
    options.columns = [...(columns as string[])];
  } else if (!header) {
    read.fail("options.columns", "is required when options.header is false");
  }
  return options;
}

/** The handler's check of an unknown payload; `importPayload` is the same check, typed for callers. */
export function readImportPayload(value: unknown): ImportPayload {
  const read: PayloadReader = new PayloadReader(ImportError, "not an import payload");
  const raw = read.object(value, "payload", IMPORT_KEYS);
  const file = read.file(raw.file, "file");
  const payload: ImportPayload = {
    importer: read.name(raw.importer, "importer"),
    file,
    format: read.fileFormat(raw.format, file),
    options: readImportOptions(read, raw.options),
    dryRun: read.boolean(raw.dryRun, "dryRun", false),
  };
  if (raw.rejectsFile !== undefined) {
    payload.rejectsFile = read.file(raw.rejectsFile, "rejectsFile");
    if (payload.rejectsFile === file) read.fail("rejectsFile", "must differ from file");
  }
  return payload;
}

const EXPORT_KEYS = ["exporter", "file", "format", "params", "options"] as const;
const EXPORT_OPTION_KEYS = ["delimiter", "header", "bom", "escapeFormulas", "recordDelimiter"] as const;

/** The handler's check of an unknown payload; `exportPayload` is the same check, typed for callers. */
export function readExportPayload(value: unknown): ExportPayload {
  const read: PayloadReader = new PayloadReader(ExportError, "not an export payload");
  const raw = read.object(value, "payload", EXPORT_KEYS);
  const options = read.object(raw.options ?? {}, "options", EXPORT_OPTION_KEYS);
  const file = read.file(raw.file, "file");
  const payload: ExportPayload = {
    exporter: read.name(raw.exporter, "exporter"),
    file,
    format: read.fileFormat(raw.format, file),
    options: {
      delimiter: read.char(options.delimiter, "options.delimiter", ","),
      header: read.boolean(options.header, "options.header", true),
      bom: read.boolean(options.bom, "options.bom", false),
      escapeFormulas: read.boolean(options.escapeFormulas, "options.escapeFormulas", true),
      recordDelimiter: read.oneOf(options.recordDelimiter, "options.recordDelimiter", ["\n", "\r\n"], "\n"),
    },
  };
  if (raw.params !== undefined) {
    if (!isJson(raw.params)) read.fail("params", "must be JSON (plain objects, arrays, strings, finite numbers, booleans, null)");
    payload.params = raw.params;
  }
  return payload;
}

/**
 * Validates what a request wants imported and returns the payload to enqueue: plain JSON,
 * every option explicit. Throws `ImportError` (not retryable) naming the first problem.
 */
export const importPayload: (input: ImportPayloadInput) => ImportPayload = readImportPayload;

/**
 * Validates what a request wants exported and returns the payload to enqueue. `params`
 * reach the exporter's `rows(params)` unchanged, so they must be JSON.
 */
export const exportPayload: (input: ExportPayloadInput) => ExportPayload = readExportPayload;
