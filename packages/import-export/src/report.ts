export interface ImportRowError {
  /** 1-based line of the file on which the rejected record starts; the header is line 1. */
  line: number;
  /** The column the problem is in, or "" when it is about the whole record. */
  field: string;
  message: string;
}

/** An import job's result. Counts are exact; `errors` is capped, `truncatedErrors` counts the rest. */
export interface ImportReport {
  /** Data records read (the header is not one). Always imported + rejected. */
  read: number;
  imported: number;
  rejected: number;
  errors: ImportRowError[];
  truncatedErrors?: number;
}

/** Saved with every batch: the report so far, the resume cursor, and what a progress bar needs. */
export interface ImportProgress extends ImportReport {
  /** Last line of the last record counted: a retry skips every record starting at or before it. */
  line: number;
  bytes: number;
  totalBytes: number;
  /** Records the whole file should hold, extrapolated from the bytes parsed so far; null before any. */
  estimatedTotal: number | null;
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
  if (p.truncatedErrors !== undefined && !isCount(p.truncatedErrors)) return null;
  return value as ImportProgress;
}

export class ReportBuilder {
  private read = 0;
  private imported = 0;
  private rejected = 0;
  private readonly errors: ImportRowError[] = [];
  private truncatedErrors = 0;

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
    return report;
  }

  /** `parsed`: records the parser has read in `bytes`, which may run ahead of `read`. */
  progress(line: number, bytes: number, totalBytes: number, parsed: number): ImportProgress {
    const estimatedTotal = bytes > 0 ? Math.max(this.read, Math.round((parsed * totalBytes) / bytes)) : null;
    return { ...this.report(), line, bytes, totalBytes, estimatedTotal };
  }
}
