import { isUtf8 } from "node:buffer";
import { Transform, type TransformCallback } from "node:stream";

const LF = 0x0a;
const CR = 0x0d;

/** What a row with invalid UTF-8 is rejected with: what is wrong and the two ways to fix it. */
export const INVALID_UTF8_MESSAGE =
  'invalid UTF-8: the line holds bytes that are not text in UTF-8 (a file saved as Windows-1252 or Latin-1?); re-save the file as UTF-8, or import it with options.encoding "windows-1252" or "latin1"';

/**
 * Passes a UTF-8 file's bytes through unchanged and notes the lines that hold invalid UTF-8.
 * The encoding is sniffed on the first bytes only, and csv-parse turns invalid bytes into
 * U+FFFD without a word: a Windows-1252 "é" past the sample would be imported as "caf\uFFFD".
 * Checking here, on the bytes, tells such a U+FFFD from one the file really holds, and keeps
 * the state of a character split between two chunks.
 *
 * Lines are counted as csv-reader counts them (CR LF, LF and CR each end one), so a record
 * spanning lines `line`..`endLine` holds invalid bytes when `invalidUpTo(endLine)` finds some.
 */
export class Utf8Check extends Transform {
  /** Lines with invalid bytes not yet claimed by a record; the parser reads only a little ahead. */
  private readonly invalid: number[] = [];
  private line = 1;
  private pendingCr = false;
  /** Continuation bytes still expected, and the range the next one must fall in. */
  private needed = 0;
  private lower = 0x80;
  private upper = 0xbf;

  /** Whether any line up to `endLine` held invalid bytes; forgets them. */
  invalidUpTo(endLine: number): boolean {
    let found = false;
    while (this.invalid.length > 0 && (this.invalid[0] as number) <= endLine) {
      this.invalid.shift();
      found = true;
    }
    return found;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    const whole = this.needed === 0 ? completeEnd(chunk) : 0;
    if (whole > 0 && isUtf8(chunk.subarray(0, whole))) {
      this.countLines(chunk, whole);
      this.check(chunk, whole);
    } else {
      this.check(chunk, 0);
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.needed > 0) this.mark();
    callback();
  }

  private mark(): void {
    if (this.invalid[this.invalid.length - 1] !== this.line) this.invalid.push(this.line);
  }

  /** Line breaks of `chunk` before `end`, known to be valid UTF-8: native searches, no byte loop. */
  private countLines(chunk: Buffer, end: number): void {
    if (this.pendingCr) {
      this.pendingCr = false;
      if (chunk[0] !== LF) this.line += 1;
    }
    for (let at = chunk.indexOf(LF); at !== -1 && at < end; at = chunk.indexOf(LF, at + 1)) this.line += 1;
    for (let at = chunk.indexOf(CR); at !== -1 && at < end; at = chunk.indexOf(CR, at + 1)) {
      if (at + 1 === chunk.length) this.pendingCr = true;
      else if (chunk[at + 1] !== LF) this.line += 1;
    }
  }

  /** Checks the bytes of `chunk` from `start` one by one (WHATWG's UTF-8 decoder, without decoding). */
  private check(chunk: Buffer, start: number): void {
    for (let i = start; i < chunk.length; i++) {
      const byte = chunk[i] as number;
      if (byte === CR || byte === LF || this.pendingCr) {
        // An unfinished character before a line break is an error of the line it started on.
        if (this.needed > 0) this.reset();
        if (this.pendingCr) {
          this.pendingCr = false;
          if (byte !== LF) this.line += 1;
        }
        if (byte === LF) this.line += 1;
        if (byte === CR) this.pendingCr = true;
        if (byte === CR || byte === LF) continue;
      }
      if (this.needed === 0) {
        if (byte < 0x80) continue;
        if (byte >= 0xc2 && byte <= 0xdf) this.needed = 1;
        else if (byte >= 0xe0 && byte <= 0xef) {
          this.needed = 2;
          if (byte === 0xe0) this.lower = 0xa0;
          if (byte === 0xed) this.upper = 0x9f;
        } else if (byte >= 0xf0 && byte <= 0xf4) {
          this.needed = 3;
          if (byte === 0xf0) this.lower = 0x90;
          if (byte === 0xf4) this.upper = 0x8f;
        } else this.mark();
        continue;
      }
      if (byte < this.lower || byte > this.upper) {
        // The sequence ends unfinished; this byte may start the next one.
        this.reset();
        i -= 1;
        continue;
      }
      this.lower = 0x80;
      this.upper = 0xbf;
      this.needed -= 1;
    }
  }

  private reset(): void {
    this.mark();
    this.needed = 0;
    this.lower = 0x80;
    this.upper = 0xbf;
  }
}

/** Where the last complete character of `chunk` ends: a character split with the next chunk is checked byte by byte. */
function completeEnd(chunk: Buffer): number {
  let end = chunk.length;
  let back = 0;
  while (back < 3 && end - back - 1 >= 0 && ((chunk[end - back - 1] as number) & 0xc0) === 0x80) back += 1;
  const lead = chunk[end - back - 1];
  if (lead !== undefined && lead >= 0xc0) end = end - back - 1;
  return end;
}
