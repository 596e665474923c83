import { BatchWriter, type PendingRow } from "./batch-writer.js";
import type { Capabilities } from "./context.js";
import { ImportError } from "./errors.js";
import { matchHeader } from "./header.js";
import type { Importer, Validation } from "./importer.js";
import type { ImportOptions } from "./payload.js";
import type { RecordSource } from "./record-source.js";
import type { RejectsFile } from "./rejects-file.js";
import { ReportBuilder, type ImportProgress, type ImportReport } from "./report.js";

export interface ImportRun {
  importer: Importer;
  options: ImportOptions;
  source: RecordSource;
  totalBytes: number;
  capabilities: Capabilities;
  /** Where a checkpointed earlier attempt stopped. */
  saved: ImportProgress | undefined;
  dryRun: boolean;
  rejects: RejectsFile | undefined;
  batchSize: number;
  maxErrors: number;
  extra: ReportBuilder["extra"];
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

/** The column names rows are keyed by, checked against what the importer declares. */
function columnsOf(found: readonly string[], importer: Importer): string[] {
  const match = matchHeader(found, importer.header);
  if (!match.ok) throw new ImportError(`the file cannot be imported: ${match.message}`, { retryable: false });
  return match.columns;
}

/** Reads every record, validates it, and writes the valid ones in batches with their progress. */
export async function runImport(run: ImportRun): Promise<ImportReport> {
  const { importer, options, source, capabilities, saved, rejects } = run;
  const cursor = saved?.line ?? 0;
  const report = new ReportBuilder(run.maxErrors, saved);
  Object.assign(report.extra, run.extra);
  const writer = new BatchWriter({ importer, capabilities, dryRun: run.dryRun, report, rejects });
  let found = options.header ? undefined : options.columns;
  let columns = found === undefined ? undefined : columnsOf(found, importer);
  let batch: PendingRow[] = [];
  let pending = 0;
  let line = cursor;

  const flush = async (): Promise<void> => {
    const rows = batch;
    batch = [];
    pending = 0;
    const { bytes, records } = source.position();
    await writer.write(rows, line, (rejectsBytes) => report.progress(line, bytes, run.totalBytes, records - (options.header ? 1 : 0), rejectsBytes));
    // For people watching (a progress bar): the counts so far and the estimate, after each batch.
    // The queue throttles the writes; a report that fails changes nothing of the import.
    if (capabilities.reportProgress) {
      const { read, imported, rejected, estimatedTotal } = report.progress(line, bytes, run.totalBytes, records - (options.header ? 1 : 0));
      void capabilities.reportProgress({ read, imported, rejected, estimatedTotal, bytes, totalBytes: run.totalBytes }).catch(() => undefined);
    }
  };

  for await (const record of source.records) {
    if (capabilities.signal?.aborted) throw new ImportError("import aborted", { retryable: true, cause: capabilities.signal.reason });
    if (columns === undefined) {
      // Explicit columns rename the header's; the header still has to hold what the importer needs.
      found = options.columns ?? record.fields;
      columns = columnsOf(found, importer);
      rejects?.header(record.fields);
      continue;
    }
    if (record.line <= cursor) continue;
    line = record.endLine;
    pending += 1;
    const row: Row = record.problem === undefined ? toRow(record.fields, columns, options.relaxColumnCount) : { ok: false, message: record.problem };
    const problems = row.ok
      ? checkValidation(importer.validate(row.value, record.line))
      : { ok: false as const, errors: [{ field: "", message: row.message }] };
    if (problems.ok) {
      batch.push({ value: problems.value, line: record.line, fields: record.fields });
      report.accept();
    } else {
      report.reject(record.line, problems.errors);
      rejects?.add(record.line, record.fields, problems.errors);
    }
    if (pending >= run.batchSize) await flush();
  }
  const broken = source.malformed();
  if (broken !== undefined && broken.line > cursor) {
    // Nothing but a broken record: this is not a CSV file (or not in this delimiter/quote), not a file of bad rows.
    if (report.report().read === 0) {
      throw new ImportError(`the file cannot be read as CSV: ${broken.message} (line ${broken.line})`, { retryable: false });
    }
    line = broken.line;
    pending += 1;
    const message = `${broken.message}; the rest of the file was not read`;
    report.reject(broken.line, [{ field: "", message }]);
    rejects?.add(broken.line, [], [{ field: "", message }]);
  }
  if (pending > 0) await flush();
  return report.report();
}
