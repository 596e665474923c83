import { open } from "node:fs/promises";
import { capabilities, type Capabilities, type JobContextLike } from "./context.js";
import { readCsv } from "./csv-reader.js";
import { ImportError, messageOf } from "./errors.js";
import type { Importer } from "./importer.js";
import { runImport } from "./import-run.js";
import { resolveExistingFile, resolveNewFile } from "./path-safety.js";
import { readImportPayload, type ImportPayload } from "./payload.js";
import type { RecordSource, SpreadsheetFormat } from "./record-source.js";
import { RejectsFile } from "./rejects-file.js";
import { readProgress, type ImportProgress, type ImportReport } from "./report.js";
import { findByName } from "./registry.js";
import { openText } from "./text-source.js";

export type { FieldError, Importer, Validation } from "./importer.js";

export interface ImportHandlerOptions {
  importers: Readonly<Record<string, Importer>>;
  /** Payload files are resolved inside this directory, symlinks followed. */
  baseDir: string;
  /** Records per batch: one writeBatch and one checkpoint per batch. Default 500. */
  batchSize?: number;
  /** Error entries kept in the report; counts stay exact beyond it. Default 100. */
  maxErrors?: number;
  /** Spreadsheet formats besides CSV, from their own entry points (`xlsxFormat()` from `@forge/import-export/xlsx`). */
  formats?: readonly SpreadsheetFormat[];
}

export type ImportHandler = (payload: unknown, ctx?: JobContextLike) => Promise<ImportReport>;

function positiveInteger(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) throw new TypeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

function fail(message: string, retryable: boolean, cause?: unknown): never {
  throw new ImportError(message, { retryable, cause });
}

/** A cursor is only trusted when checkpoints made it: only then did it commit with its batch. */
function savedProgress(caps: Capabilities, totalBytes: number): ImportProgress | undefined {
  if (caps.checkpoint === undefined) return undefined;
  const saved = readProgress(caps.progress);
  if (saved === null) fail("saved progress is not an import cursor; refusing to guess where to resume", false);
  if (saved !== undefined && saved.totalBytes !== totalBytes) {
    fail(`the file changed since the import started (${saved.totalBytes} bytes then, ${totalBytes} now)`, false);
  }
  return saved;
}

/**
 * The worker-side handler for IMPORT_JOB_TASK. Invalid rows and malformed records end up
 * in the returned report; it throws only for what a retry can fix (retryable) or what
 * none can (an `ImportError` with `retryable: false`): a file that is not text, not CSV, or
 * whose header lacks a required column fails at once with one message.
 */
export function createImportHandler(options: ImportHandlerOptions): ImportHandler {
  const { importers, baseDir } = options;
  const batchSize = positiveInteger("batchSize", options.batchSize ?? 500, 1);
  const maxErrors = positiveInteger("maxErrors", options.maxErrors ?? 100, 0);
  const formats = new Map((options.formats ?? []).map((f) => [f.name, f]));

  async function openRejects(job: ImportPayload, saved: ImportProgress | undefined, delimiter: string): Promise<RejectsFile | undefined> {
    if (job.rejectsFile === undefined) return undefined;
    const target = await resolveNewFile(baseDir, job.rejectsFile);
    if (!target.ok) fail(target.message, target.retryable, target.cause);
    try {
      return await RejectsFile.open(target.path, saved?.rejectsBytes, delimiter);
    } catch (error) {
      return fail(`rejects file "${job.rejectsFile}" cannot be written: ${messageOf(error)}`, true, error);
    }
  }

  return async function importFile(payload, ctx) {
    const job = readImportPayload(payload);
    const importer = findByName(importers, job.importer, "importer", ImportError);
    const caps = capabilities(ctx);
    if (job.dryRun && caps.checkpoint === undefined) {
      fail("a dry run needs ctx.checkpoint: its writes run in a transaction that is rolled back", false);
    }
    const located = await resolveExistingFile(baseDir, job.file);
    if (!located.ok) fail(located.message, located.retryable, located.cause);

    let handle;
    try {
      handle = await open(located.path, "r");
    } catch (error) {
      fail(`file "${job.file}" cannot be read: ${messageOf(error)}`, true, error);
    }
    let source: RecordSource | undefined;
    let rejects: RejectsFile | undefined;
    try {
      const { size } = await handle.stat();
      const saved = savedProgress(caps, size);
      const extra: Parameters<typeof runImport>[0]["extra"] = job.dryRun ? { dryRun: true } : {};
      let delimiter = ",";
      let sheet: (() => string | undefined) | undefined;
      if (job.format === "csv") {
        const text = await openText(handle, size, job.file, job.options);
        source = readCsv(text.input, { ...job.options, delimiter: text.format.delimiter }, text.fileBytes, text.lineProblem);
        extra.format = text.format;
        delimiter = text.format.delimiter;
      } else {
        const format =
          formats.get(job.format) ??
          fail(
            `format "${job.format}" needs its reader: pass formats: [xlsxFormat()] from this package's "${job.format}" entry point to createImportHandler`,
            false,
          );
        const opened = await format.openSheet(located.path, job.options.sheet);
        source = opened;
        sheet = opened.sheet;
      }
      rejects = await openRejects(job, saved, delimiter);
      if (job.rejectsFile !== undefined) extra.rejectsFile = job.rejectsFile;
      const report = await runImport({
        importer,
        options: job.options,
        source,
        totalBytes: size,
        capabilities: caps,
        saved,
        dryRun: job.dryRun,
        rejects,
        batchSize,
        maxErrors,
        extra,
      });
      const read = sheet?.();
      return read === undefined ? report : { ...report, sheet: read };
    } finally {
      source?.close();
      await rejects?.close();
      await handle.close();
    }
  };
}
