export interface ImportRowError {
  /** 1-based line of the file on which the rejected record starts; the header is line 1. */
  line: number;
  /** The column the problem is in, or "" when it is about the whole record. */
  field: string;
  message: string;
}

/** What an upsert did with its rows; `writeBatch` of an importer with a `naturalKey` returns it. */
export interface WriteCounts {
  created: number;
  updated: number;
  unchanged: number;
}

/** An import job's result. Counts are exact; `errors` is capped, `truncatedErrors` counts the rest. */
export interface ImportReport {
  /** Data records read (the header is not one). Always imported + rejected. */
  read: number;
  imported: number;
  rejected: number;
  errors: ImportRowError[];
  truncatedErrors?: number;
  /** With a `naturalKey`: what the writes did. created + updated + unchanged + duplicates = imported. */
  created?: number;
  updated?: number;
  unchanged?: number;
  /** With a `naturalKey`: rows replaced by a later row of the same key in the same batch (not written). */
  duplicates?: number;
  /** A dry run: every write was rolled back; the counts say what the import would do. */
  dryRun?: true;
  /** How the file was read: the encoding and delimiter declared or detected (CSV). */
  format?: { encoding: string; delimiter: string };
  /** The sheet read (spreadsheet formats). */
  sheet?: string;
  /** The rejected rows, as a CSV to fix and upload again (relative to baseDir), when asked for. */
  rejectsFile?: string;
}

/** Saved with every batch: the report so far, the resume cursor, and what a progress bar needs. */
export interface ImportProgress extends ImportReport {
  /** Last line of the last record counted: a retry skips every record starting at or before it. */
  line: number;
  bytes: number;
  totalBytes: number;
  /** Records the whole file should hold, extrapolated from the bytes parsed so far; null before any. */
  estimatedTotal: number | null;
  /** Length of the rejects file when this progress was saved: a resumed import cuts it back there. */
  rejectsBytes?: number;
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function isRowError(value: unknown): value is ImportRowError {
  if (typeof value !== "object" || value === null) return false;
  const { line, field, message } = value as Record<string, unknown>;
  return isCount(line) && typeof field === "string" && typeof message === "string";
}

/**
 * Reads progress saved by an earlier attempt. Undefined when there is none; null when
 * something is saved that is not an import cursor (extra keys, such as a queue's own
 * timestamp, are fine).
 */
export function readProgress(value: unknown): ImportProgress | undefined | null {
  if (value === null || value === undefined) return undefined;
  if (typeof value !== "object") return null;
  const p = value as Record<string, unknown>;
  const counts = [p.line, p.read, p.imported, p.rejected, p.bytes, p.totalBytes];
  if (!counts.every(isCount) || !Array.isArray(p.errors) || !p.errors.every(isRowError)) return null;
  const optional = [p.truncatedErrors, p.created, p.updated, p.unchanged, p.duplicates, p.rejectsBytes];
  if (!optional.every((n) => n === undefined || isCount(n))) return null;
  return value as ImportProgress;
}

export class ReportBuilder {
  private read = 0;
  private imported = 0;
  private rejected = 0;
  private readonly errors: ImportRowError[] = [];
  private truncatedErrors = 0;
  private counts: (WriteCounts & { duplicates: number }) | undefined;
  /** Stamped on the report as they are: whether this is a dry run, how the file was read, and so on. */
  readonly extra: Pick<ImportReport, "dryRun" | "format" | "sheet" | "rejectsFile"> = {};

  constructor(
    private readonly maxErrors: number,
    from?: ImportReport,
  ) {
    if (from === undefined) return;
    this.read = from.read;
    this.imported = from.imported;
    this.rejected = from.rejected;
    for (const error of from.errors) this.addError(error);
    this.truncatedErrors += from.truncatedErrors ?? 0;
    if (from.created !== undefined) {
      this.counts = { created: from.created, updated: from.updated ?? 0, unchanged: from.unchanged ?? 0, duplicates: from.duplicates ?? 0 };
    }
  }

  /** Adds what one batch's writes did (and the rows it dropped as duplicates). */
  wrote(counts: WriteCounts, duplicates: number): void {
    const c = (this.counts ??= { created: 0, updated: 0, unchanged: 0, duplicates: 0 });
    c.created += counts.created;
    c.updated += counts.updated;
    c.unchanged += counts.unchanged;
    c.duplicates += duplicates;
  }

  /** A row that passed validation but that the database refused (found by a dry run). */
  refused(line: number, message: string): void {
    this.imported -= 1;
    this.rejected += 1;
    this.addError({ line, field: "", message });
  }

  private addError(error: ImportRowError): void {
    if (this.errors.length < this.maxErrors) this.errors.push(error);
    else this.truncatedErrors += 1;
  }

  accept(): void {
    this.read += 1;
    this.imported += 1;
  }

  reject(line: number, problems: ReadonlyArray<{ field: string; message: string }>): void {
    this.read += 1;
    this.rejected += 1;
    if (problems.length === 0) this.addError({ line, field: "", message: "rejected by the importer" });
    for (const { field, message } of problems) this.addError({ line, field, message });
  }

  report(): ImportReport {
    const report: ImportReport = {
      read: this.read,
      imported: this.imported,
      rejected: this.rejected,
      errors: [...this.errors],
    };
    if (this.truncatedErrors > 0) report.truncatedErrors = this.truncatedErrors;
    if (this.counts !== undefined) Object.assign(report, this.counts);
    return Object.assign(report, this.extra);
  }

  /** `parsed`: records the parser has read in `bytes`, which may run ahead of `read`. */
  progress(line: number, bytes: number, totalBytes: number, parsed: number, rejectsBytes?: number): ImportProgress {
    const estimatedTotal = bytes > 0 ? Math.max(this.read, Math.round((parsed * totalBytes) / bytes)) : null;
    const progress: ImportProgress = { ...this.report(), line, bytes, totalBytes, estimatedTotal };
    if (rejectsBytes !== undefined) progress.rejectsBytes = rejectsBytes;
    return progress;
  }
}
