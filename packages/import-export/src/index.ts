export { IMPORT_JOB_TASK, EXPORT_JOB_TASK, type TaskName } from "./task.js";
export {
  importPayload,
  exportPayload,
  type ImportPayload,
  type ImportPayloadInput,
  type ImportOptions,
  type ImportOptionsInput,
  type ImportEncoding,
  type ImportFileFormat,
  type ExportPayload,
  type ExportPayloadInput,
  type ExportOptions,
  type JsonValue,
} from "./payload.js";
export { createImportHandler, type Importer, type ImportHandler, type ImportHandlerOptions, type Validation, type FieldError } from "./import-handler.js";
export {
  createExportHandler,
  type Exporter,
  type ExportColumn,
  type ExportHandler,
  type ExportHandlerOptions,
  type ExportResult,
  type ExportRowsContext,
} from "./export-handler.js";
export type { ImportReport, ImportRowError, ImportProgress, WriteCounts } from "./report.js";
export { matchHeader, normalizeColumn, type HeaderSpec, type HeaderMatch } from "./header.js";
export { IMPORT_ENCODINGS, DELIMITER_CANDIDATES, type TextEncoding } from "./sniff.js";
export { REJECT_COLUMNS } from "./rejects-file.js";
export type { CsvRecord, MalformedRecord, ParsePosition, RecordSource, SpreadsheetFormat } from "./record-source.js";
export type { JobContextLike, Checkpoint } from "./context.js";
export { CsvJobError, ImportError, ExportError, type JobErrorOptions } from "./errors.js";
export { escapeFormula } from "./formula.js";
