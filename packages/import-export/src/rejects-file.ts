import { open, type FileHandle } from "node:fs/promises";
import { stringify } from "csv-stringify/sync";

/** Appended after the file's own columns, so a fixed file can be uploaded as it is. */
export const REJECT_COLUMNS = ["import_line", "import_errors"] as const;

/**
 * The rejected rows of an import as a CSV the user can fix and upload again: the file's
 * own header and fields, then the line and what was wrong. Rows are appended batch by
 * batch before each checkpoint, and the length at the checkpoint is saved with the
 * progress: a resumed import cuts the file back to it, so rows written after the last
 * checkpoint (by an attempt that then died) are not written twice.
 */
export class RejectsFile {
  private pending: string[] = [];
  private constructor(
    private readonly handle: FileHandle,
    private bytes: number,
    private readonly delimiter: string,
  ) {}

  static async open(path: string, resumeAt: number | undefined, delimiter: string): Promise<RejectsFile> {
    const handle = await open(path, resumeAt === undefined ? "w" : "r+");
    try {
      await handle.truncate(resumeAt ?? 0);
    } catch (error) {
      await handle.close();
      throw error;
    }
    return new RejectsFile(handle, resumeAt ?? 0, delimiter);
  }

  private line(fields: readonly string[]): void {
    // Fields go back exactly as uploaded (no formula escaping, unlike exports): a fixed file
    // must import the same values, and they are the uploader's own cells.
    this.pending.push(stringify([fields], { delimiter: this.delimiter, quoted_match: "\r" }));
  }

  /** Once, when the columns are known, and only into an empty file. */
  header(columns: readonly string[]): void {
    if (this.bytes === 0 && this.pending.length === 0) this.line([...columns, ...REJECT_COLUMNS]);
  }

  add(line: number, fields: readonly string[], problems: ReadonlyArray<{ field: string; message: string }>): void {
    const why = problems.map((p) => (p.field === "" ? p.message : `${p.field}: ${p.message}`)).join("; ");
    this.line([...fields, String(line), why || "rejected by the importer"]);
  }

  /** Writes what was added since the last flush; resolves with the file's length. */
  async flush(): Promise<number> {
    if (this.pending.length === 0) return this.bytes;
    const text = Buffer.from(this.pending.join(""), "utf8");
    this.pending = [];
    await this.handle.write(text, 0, text.length, this.bytes);
    this.bytes += text.length;
    return this.bytes;
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}
