import { closeSync, mkdtempSync, openSync, readSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A workbook's shared-string table, kept on disk. Excel stores each distinct text of a workbook
 * once, in a table read before the sheets, and a cell names its text by index; exceljs's
 * streaming reader keeps that table as an array of strings, so its memory grows with the
 * distinct texts of the file. Here each text goes to a temporary file: memory holds 8 bytes per
 * text (where it starts) and a bounded cache of texts read lately.
 *
 * Only the text is kept: rich text is stored as its runs joined, which is what the importer
 * reads of a cell (`cellText`).
 */
export class SharedStrings {
  private readonly dir = mkdtempSync(join(tmpdir(), "forge-xlsx-"));
  private readonly path = join(this.dir, "strings");
  private readonly fd = openSync(this.path, "w+");
  /** starts[i]: the byte where text i starts; starts[count]: the end of the last. */
  private starts = new Float64Array(1024);
  private count = 0;
  private flushed = 0;
  private pending: Buffer[] = [];
  private readonly cache = new Map<number, string>();
  private closed = false;

  constructor() {
    // Gone with the process whatever happens (where the system allows unlinking an open file).
    try {
      unlinkSync(this.path);
    } catch {
      // Removed by close().
    }
  }

  /** Appends the next text (exceljs pushes them in table order). */
  push(value: unknown): number {
    const buffer = Buffer.from(textOf(value), "utf8");
    if (this.count + 2 > this.starts.length) {
      const grown = new Float64Array(this.starts.length * 2);
      grown.set(this.starts);
      this.starts = grown;
    }
    const start = this.starts[this.count] as number;
    this.starts[++this.count] = start + buffer.length;
    this.pending.push(buffer);
    if (this.end() - this.flushed >= FLUSH_BYTES) this.flush();
    return this.count;
  }

  get length(): number {
    return this.count;
  }

  /** Text `index`, or undefined past the table (a cell naming a text the table lacks). */
  get(index: number): string | undefined {
    if (!Number.isInteger(index) || index < 0 || index >= this.count) return undefined;
    const hit = this.cache.get(index);
    if (hit !== undefined) return hit;
    this.flush();
    const start = this.starts[index] as number;
    const length = (this.starts[index + 1] as number) - start;
    const buffer = Buffer.allocUnsafe(length);
    let read = 0;
    while (read < length) read += readSync(this.fd, buffer, read, length - read, start + read);
    const text = buffer.toString("utf8");
    if (this.cache.size >= CACHED_TEXTS) this.cache.delete(this.cache.keys().next().value as number);
    this.cache.set(index, text);
    return text;
  }

  /** What exceljs's reader uses: `push` while reading the table, `table[index]` for each cell. */
  asArray(): unknown[] {
    return new Proxy([] as unknown[], {
      get: (target, property, receiver) => {
        if (property === "push") return (...values: unknown[]) => values.reduce<number>((_, v) => this.push(v), this.count);
        if (property === "length") return this.count;
        if (typeof property === "string" && /^\d+$/.test(property)) return this.get(Number(property));
        return Reflect.get(target, property, receiver) as unknown;
      },
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pending = [];
    closeSync(this.fd);
    rmSync(this.dir, { recursive: true, force: true });
  }

  private end(): number {
    return this.starts[this.count] as number;
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const chunk = Buffer.concat(this.pending);
    let written = 0;
    while (written < chunk.length) written += writeSync(this.fd, chunk, written, chunk.length - written, this.flushed + written);
    this.flushed += chunk.length;
    this.pending = [];
  }
}

/** Bytes of texts gathered before a write to the file. */
const FLUSH_BYTES = 1 << 20;
/** Texts kept in memory once read: a column of a few repeated texts reads the file once for each. */
const CACHED_TEXTS = 4096;

function textOf(value: unknown): string {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object" && "richText" in value && Array.isArray(value.richText)) {
    return value.richText.map((part: { text?: unknown }) => (typeof part.text === "string" ? part.text : "")).join("");
  }
  return value === null || value === undefined ? "" : String(value);
}
