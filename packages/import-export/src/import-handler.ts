import { open } from "node:fs/promises";
import { capabilities, type JobContextLike } from "./context.js";
import { readCsv, type CsvReader } from "./csv-reader.js";
import { ImportError, messageOf, retryableFailure, takenOver } from "./errors.js";
import { findByName } from "./registry.js";
import { resolveExistingFile } from "./path-safety.js";
import { readImportPayload, type ImportOptions } from "./payload.js";
import { readProgress, ReportBuilder, type ImportReport } from "./report.js";

export interface FieldError {
  field: string;
  message: string;
}

export type Validation<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

/**
 * Turns CSV rows into values and writes them in batches. `Tx` is whatever the queue's
 * `ctx.checkpoint` hands its work function (for PostgreSQL, a pg client inside the
 * checkpoint's transaction); it is undefined when the handler runs without checkpoints.
 */
export interface Importer<T = unknown, Tx = unknown> {
  /** Pure: no I/O. A rejected row is data for the report, never an exception. */
  validate(row: Record<string, string>, line: number): Validation<T>;
  writeBatch(values: T[], tx: Tx | undefined): Promise<void>;
}

export interface ImportHandlerOptions {
  importers: Readonly<Record<string, Importer>>;
  /** Payload files are resolved inside this directory, symlinks followed. */
  baseDir: string;
  /** Records per batch: one writeBatch and one checkpoint per batch. Default 500. */
  batchSize?: number;
  /** Error entries kept in the report; counts stay exact beyond it. Default 100. */
  maxErrors?: number;
}

export type ImportHandler = (payload: unknown, ctx?: JobContextLike) => Promise<ImportReport>;

function positiveInteger(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) throw new TypeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

type Row = { ok: true; value: Record<string, string> } | { ok: false; message: string };

function toRow(fields: string[], columns: readonly string[], relax: boolean): Row {
  if (fields.length !== columns.length && !relax) {
    return { ok: false, message: `expected ${columns.length} fields, got ${fields.length}` };
  }
  // fromEntries defines own properties, so a column named "__proto__" stays a column.
  return { ok: true, value: Object.fromEntries(columns.map((column, i) => [column, fields[i] ?? ""])) };
}

function checkValidation(result: unknown): Validation<unknown> {
  if (typeof result === "object" && result !== null) {
    const { ok, errors } = result as Record<string, unknown>;
    if (ok === true) return result as Validation<unknown>;
    if (ok === false && Array.isArray(errors)) {
      return {
        ok: false,
        errors: errors.map((e: { field?: unknown; message?: unknown }) => ({
          field: String(e?.field ?? ""),
          message: String(e?.message ?? "invalid"),
        })),
      };
    }
  }
  throw new TypeError("importer.validate must return { ok: true, value } or { ok: false, errors }");
}

/**
 * The worker-side handler for IMPORT_JOB_TASK. Invalid rows and malformed records end up
 * in the returned report; it throws only for what a retry can fix (retryable) or what
 * none can (an `ImportError` with `retryable: false`).
 */
export function createImportHandler(options: ImportHandlerOptions): ImportHandler {
  const { importers, baseDir } = options;
  const batchSize = positiveInteger("batchSize", options.batchSize ?? 500, 1);
  const maxErrors = positiveInteger("maxErrors", options.maxErrors ?? 100, 0);

  return async function importCsv(payload, ctx) {
    const job = readImportPayload(payload);
    const importer = findByName(importers, job.importer, "importer", ImportError);
    const located = await resolveExistingFile(baseDir, job.file);
    if (!located.ok) throw new ImportError(located.message, { retryable: located.retryable, cause: located.cause });

    let handle;
    try {
      handle = await open(located.path, "r");
    } catch (error) {
      throw new ImportError(`file "${job.file}" cannot be read: ${messageOf(error)}`, { retryable: true, cause: error });
    }
    try {
      const { size } = await handle.stat();
      const reader = readCsv(handle.createReadStream({ autoClose: false }), job.options);
      try {
        return await run(importer, job.options, reader, size, ctx);
      } finally {
        reader.close();
      }
    } finally {
      await handle.close();
    }
  };

  async function run(importer: Importer, csv: ImportOptions, reader: CsvReader, totalBytes: number, ctx: unknown): Promise<ImportReport> {
    const { signal, heartbeat, checkpoint, progress } = capabilities(ctx);
    // A cursor is only trusted when checkpoints made it: only then did it commit with its batch.
    const saved = checkpoint === undefined ? undefined : readProgress(progress);
    if (saved === null) throw new ImportError("saved progress is not an import cursor; refusing to guess where to resume", { retryable: false });
    if (saved !== undefined && saved.totalBytes !== totalBytes) {
      throw new ImportError(`the file changed since the import started (${saved.totalBytes} bytes then, ${totalBytes} now)`, { retryable: false });
    }
    const cursor = saved?.line ?? 0;
    const report = new ReportBuilder(maxErrors, saved);
    let columns = csv.header ? undefined : csv.columns;
    let values: unknown[] = [];
    let pending = 0;
    let line = cursor;

    // Without a checkpoint the batch is written on its own and a heartbeat asks whether the job is still ours.
    const writeAlone = async (batch: unknown[]): Promise<boolean> => {
      if (batch.length > 0) await importer.writeBatch(batch, undefined);
      return heartbeat === undefined || heartbeat();
    };
    const flush = async (): Promise<void> => {
      const batch = values;
      values = [];
      pending = 0;
      let owned: boolean;
      try {
        if (checkpoint === undefined) {
          owned = await writeAlone(batch);
        } else {
          const { bytes, records } = reader.position();
          const state = report.progress(line, bytes, totalBytes, records - (csv.header ? 1 : 0));
          owned = await checkpoint(state, batch.length > 0 ? (tx) => importer.writeBatch(batch, tx) : undefined);
        }
      } catch (error) {
        throw retryableFailure(ImportError, `writing the batch that ends on line ${line} failed`, error);
      }
      if (!owned) throw takenOver(ImportError);
    };

    for await (const record of reader.records) {
      if (signal?.aborted) throw new ImportError("import aborted", { retryable: true, cause: signal.reason });
      if (columns === undefined) {
        columns = csv.columns ?? record.fields;
        continue;
      }
      if (record.line <= cursor) continue;
      line = record.endLine;
      pending += 1;
      const row = toRow(record.fields, columns, csv.relaxColumnCount);
      if (!row.ok) {
        report.reject(record.line, [{ field: "", message: row.message }]);
      } else {
        const result = checkValidation(importer.validate(row.value, record.line));
        if (result.ok) {
          values.push(result.value);
          report.accept();
        } else {
          report.reject(record.line, result.errors);
        }
      }
      if (pending >= batchSize) await flush();
    }
    const broken = reader.malformed();
    if (broken !== undefined && broken.line > cursor) {
      line = broken.line;
      pending += 1;
      report.reject(broken.line, [{ field: "", message: `${broken.message}; the rest of the file was not read` }]);
    }
    if (pending > 0) await flush();
    return report.report();
  }
}
