import { Transform, type Readable, type TransformCallback } from "node:stream";
import { ImportError } from "./errors.js";
import { MAX_RECORD_BYTES } from "./limits.js";

/**
 * Size limits on what a workbook inflates to. An XLSX is a zip: a megabyte of upload can
 * inflate to a gigabyte of XML, and exceljs's XML parser gathers a whole text (a cell) into
 * one string, so one huge cell ends the worker with "heap out of memory" before any row is
 * read. The inflated bytes are checked here, as unzipper hands them to exceljs, before they
 * are parsed: the import fails at once, with a message naming the limit.
 */

export interface XlsxLimits {
  /** Bytes a zip entry (a sheet, the shared-string table, any part) may inflate to. */
  maxEntryBytes: number;
}

/** About fifteen million cells of a sheet: past what Excel users upload, far below a bomb's reach. */
export const DEFAULT_MAX_ENTRY_BYTES = 1024 * 1024 * 1024;

const LT = 0x3c;
const GT = 0x3e;
const SLASH = 0x2f;

function mib(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`;
}

function tooLarge(message: string): ImportError {
  return new ImportError(`the file cannot be imported as XLSX: ${message}`, { retryable: false });
}

const RECORD_LIMIT = `${mib(MAX_RECORD_BYTES)}, the limit on one record (MAX_RECORD_BYTES, as for a CSV record; not an option): Excel's own cells hold at most 32,767 characters, so this is not a workbook Excel wrote (a zip bomb?)`;

/**
 * Follows one XML part's bytes without parsing them: where each tag and text starts and
 * ends, and where each element of `kind` (a sheet's `row`, the table's `si`) starts and
 * ends. Text and tags are found with native searches; only tag names are read byte by byte.
 */
class XmlSizes {
  private offset = 0;
  /** Where the last `<` or `>` was: no text or tag may run longer than a record. */
  private boundary = 0;
  private inTag = false;
  private naming = false;
  private closing = false;
  private name = "";
  private tagStart = 0;
  private last = 0;
  /** Where the open element of `kind` started, -1 outside one, and how many have opened. */
  private open = -1;
  private count = 0;

  constructor(
    private readonly entry: string,
    private readonly kind: "row" | "si" | undefined,
  ) {}

  /** The limit `chunk` breaks, if any. */
  write(chunk: Buffer): ImportError | undefined {
    let i = 0;
    while (i < chunk.length) {
      if (this.naming) {
        const byte = chunk[i] as number;
        if (byte === SLASH && this.name === "" && !this.closing) this.closing = true;
        else if (byte > 0x20 && byte !== SLASH && byte !== GT) this.name += this.name.length < 32 ? String.fromCharCode(byte) : "";
        else this.naming = false;
        if (this.naming) {
          i += 1;
          continue;
        }
      }
      const at = chunk.indexOf(this.inTag ? GT : LT, i);
      if (at === -1) break;
      const position = this.offset + at;
      const problem = this.check(position);
      if (problem !== undefined) return problem;
      this.boundary = position;
      if (this.inTag) {
        this.inTag = false;
        const selfClosing = (at > 0 ? chunk[at - 1] : this.last) === SLASH;
        this.tagEnded(selfClosing);
      } else {
        this.inTag = true;
        this.naming = true;
        this.closing = false;
        this.name = "";
        this.tagStart = position;
      }
      i = at + 1;
    }
    this.offset += chunk.length;
    if (chunk.length > 0) this.last = chunk[chunk.length - 1] as number;
    return this.check(this.offset);
  }

  private check(position: number): ImportError | undefined {
    if (this.open >= 0 && position - this.open > MAX_RECORD_BYTES) {
      const what = this.kind === "row" ? "row" : "text";
      return tooLarge(`${what} ${this.count} of "${this.entry}" is larger than ${RECORD_LIMIT}`);
    }
    if (position - this.boundary > MAX_RECORD_BYTES) {
      return tooLarge(`"${this.entry}" holds a${this.inTag ? " tag" : " text"} larger than ${RECORD_LIMIT}`);
    }
    return undefined;
  }

  private tagEnded(selfClosing: boolean): void {
    if (this.kind === undefined || this.name.slice(this.name.lastIndexOf(":") + 1) !== this.kind) return;
    if (this.closing) this.open = -1;
    else if (!selfClosing) {
      this.open = this.tagStart;
      this.count += 1;
    }
  }
}

function kindOf(entry: string): "row" | "si" | undefined {
  if (/^xl\/worksheets\/[^/]+\.xml$/.test(entry)) return "row";
  if (entry === "xl/sharedStrings.xml") return "si";
  return undefined;
}

/** Checks an entry's bytes as they pass: the entry fails (and `onFailure` hears why) when one breaks a limit. */
function guardEntry(entry: Transform & { path: string }, limits: XlsxLimits, onFailure: (error: ImportError) => void): void {
  const xml = /\.(xml|rels)$/.test(entry.path) ? new XmlSizes(entry.path, kindOf(entry.path)) : undefined;
  let inflated = 0;
  // exceljs drains or pipes some entries without listening for errors: the failure is reported through onFailure.
  entry.on("error", () => undefined);
  entry._transform = (chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void => {
    inflated += chunk.length;
    const problem =
      inflated > limits.maxEntryBytes
        ? tooLarge(
            `"${entry.path}" inflates to more than ${limits.maxEntryBytes} bytes (maxEntryBytes); if the workbook is genuine, raise the limit: xlsxFormat({ maxEntryBytes })`,
          )
        : xml?.write(chunk);
    if (problem === undefined) return callback(null, chunk);
    onFailure(problem);
    callback(problem);
  };
}

/**
 * Makes every entry exceljs's reader inflates from `input` pass the limits. exceljs pipes the
 * file into unzipper's parser, which pushes each entry (a PassThrough) before writing into
 * it: both are reached here, on this stream and this parser only. `engaged()` says whether
 * that happened, so a change in those libraries fails the import rather than lifting the limits.
 */
export function guardZip(input: Readable, limits: XlsxLimits, onFailure: (error: ImportError) => void): { engaged: () => boolean } {
  let entries = 0;
  const pipe = input.pipe.bind(input);
  input.pipe = <T extends NodeJS.WritableStream>(destination: T, options?: { end?: boolean }): T => {
    const parser = destination as unknown as Readable;
    const push = parser.push.bind(parser);
    parser.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
      if (chunk instanceof Transform && typeof (chunk as { path?: unknown }).path === "string") {
        entries += 1;
        guardEntry(chunk as Transform & { path: string }, limits, onFailure);
      }
      return push(chunk, encoding);
    };
    return pipe(destination, options);
  };
  return { engaged: () => entries > 0 };
}
