import { randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { stringify, type Options as StringifyOptions } from "csv-stringify";
import { capabilities, type JobContextLike } from "./context.js";
import { ExportError, retryableFailure } from "./errors.js";
import { escapeFormula } from "./formula.js";
import { resolveNewFile } from "./path-safety.js";
import { readExportPayload, type ExportOptions, type ExportPayload, type JsonValue } from "./payload.js";
import type { SpreadsheetFormat } from "./record-source.js";
import { findByName } from "./registry.js";

export type ExportColumn = string | { key: string; header?: string };

export interface ExportRowsContext {
  /** Fires when the job must stop (lease lost, cancelled, shutdown); pass it to your queries. */
  signal: AbortSignal;
}

export interface Exporter<P = JsonValue | undefined> {
  /** Column order and header labels; without it, the keys of the first record. */
  columns?: readonly ExportColumn[];
  rows(params: P, ctx: ExportRowsContext): AsyncIterable<Record<string, unknown>> | Iterable<Record<string, unknown>>;
}

export interface ExportHandlerOptions {
  /** `never`: each exporter declares its own params type, checked when the payload is built. */
  exporters: Readonly<Record<string, Exporter<never>>>;
  /** Payload files are written inside this directory, symlinks followed. */
  baseDir: string;
  /** Spreadsheet formats besides CSV (`xlsxFormat()` from this package's `xlsx` entry point). */
  formats?: readonly SpreadsheetFormat[];
}

export interface ExportResult {
  /** As the payload named it, relative to baseDir. */
  file: string;
  rows: number;
  bytes: number;
}

export type ExportHandler = (payload: unknown, ctx?: JobContextLike) => Promise<ExportResult>;

function stringifyOptions(options: ExportOptions, columns: readonly ExportColumn[] | undefined): StringifyOptions {
  // Header labels come from the code, not from users: they are left alone.
  const escaped = (value: { toString(): string }, context: { header: boolean }): string =>
    context.header ? value.toString() : escapeFormula(value.toString());
  return {
    delimiter: options.delimiter,
    header: options.header,
    bom: options.bom,
    record_delimiter: options.recordDelimiter === "\r\n" ? "windows" : "unix",
    // A bare CR would end the record for a reader that accepts every line ending (ours does).
    quoted_match: "\r",
    ...(columns === undefined ? {} : { columns }),
    ...(options.escapeFormulas ? { cast: { string: escaped, number: escaped, bigint: escaped } } : {}),
  };
}

/**
 * The worker-side handler for EXPORT_JOB_TASK. Rows stream through csv-stringify into a
 * temporary file next to the target, renamed over it once complete and synced, so a
 * reader sees the previous file or the whole new one, never half of one.
 */
export function createExportHandler(options: ExportHandlerOptions): ExportHandler {
  const { exporters, baseDir } = options;
  const formats = new Map((options.formats ?? []).map((f) => [f.name, f]));

  return async function exportCsv(payload, ctx) {
    const job = readExportPayload(payload);
    const exporter = findByName(exporters, job.exporter, "exporter", ExportError) as Exporter;
    const format = job.format === "csv" ? undefined : formats.get(job.format);
    if (job.format !== "csv" && format === undefined) {
      throw new ExportError(
        `format "${job.format}" needs its writer: pass formats: [xlsxFormat()] from this package's "${job.format}" entry point to createExportHandler`,
        { retryable: false },
      );
    }
    const target = await resolveNewFile(baseDir, job.file);
    if (!target.ok) throw new ExportError(target.message, { retryable: target.retryable, cause: target.cause });

    const signal = capabilities(ctx).signal ?? new AbortController().signal;
    const temporary = path.join(path.dirname(target.path), `.${path.basename(target.path)}.${randomUUID()}.tmp`);
    let rows = 0;
    // Calls the exporter inside the pipeline, so whatever it throws cleans up like a stream error.
    async function* counted() {
      for await (const row of exporter.rows(job.params, { signal })) {
        rows += 1;
        yield row;
      }
    }
    if (format !== undefined) return exportSheet(format, exporter, job, target.path, temporary, signal);
    // flush: fsync before close, so the rename never publishes a file whose bytes are still in flight.
    const out = createWriteStream(temporary, { flags: "wx", flush: true });
    try {
      await pipeline(counted(), stringify(stringifyOptions(job.options, exporter.columns)), out, { signal });
      await rename(temporary, target.path);
      return { file: job.file, rows, bytes: out.bytesWritten };
    } catch (error) {
      // Wait for the close: a stream destroyed while still opening creates the file afterwards.
      out.destroy();
      if (!out.closed) await new Promise<void>((resolve) => out.once("close", () => resolve()));
      await rm(temporary, { force: true });
      throw retryableFailure(ExportError, `export to "${job.file}" failed`, error);
    }
  };
}

function columnKeys(columns: readonly ExportColumn[] | undefined): { key: string; header: string }[] | undefined {
  return columns?.map((c) => (typeof c === "string" ? { key: c, header: c } : { key: c.key, header: c.header ?? c.key }));
}

/** The spreadsheet path: the same temporary file and rename as CSV, the format's own writer. */
async function exportSheet(
  format: SpreadsheetFormat,
  exporter: Exporter,
  job: ExportPayload,
  target: string,
  temporary: string,
  signal: AbortSignal,
): Promise<ExportResult> {
  try {
    async function* rows() {
      yield* exporter.rows(job.params, { signal });
    }
    const count = await format.writeSheet(temporary, columnKeys(exporter.columns), rows(), signal);
    const { size } = await stat(temporary);
    await rename(temporary, target);
    return { file: job.file, rows: count, bytes: size };
  } catch (error) {
    await rm(temporary, { force: true });
    throw retryableFailure(ExportError, `export to "${job.file}" failed`, error);
  }
}
