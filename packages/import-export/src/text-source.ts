import type { FileHandle } from "node:fs/promises";
import { pipeline, Transform, type Readable } from "node:stream";
import iconv from "iconv-lite";
import { ImportError } from "./errors.js";
import type { ImportOptions } from "./payload.js";
import { chooseEncoding, detectDelimiter, notText, SNIFF_BYTES, type TextEncoding } from "./sniff.js";
import { INVALID_UTF8_MESSAGE, Utf8Check } from "./utf8-check.js";

/** How the file was read: what the payload declared, or what was detected. */
export interface TextFormat {
  encoding: TextEncoding;
  delimiter: string;
}

export interface TextSource {
  /** The file's text as UTF-8 bytes, byte order mark removed. */
  input: Readable;
  format: TextFormat;
  /** Bytes of the file behind `utf8Bytes` bytes of `input`, for progress against the file size. */
  fileBytes: (utf8Bytes: number) => number;
  /** Why lines up to `endLine` (not asked about before) cannot be imported, if anything: invalid UTF-8. */
  lineProblem?: (endLine: number) => string | undefined;
}

function decoderName(encoding: TextEncoding): string {
  return encoding === "utf8" ? "utf-8" : encoding;
}

/** Counts what passes through, so positions in the decoded text map back to the file. */
function counter(onBytes: (n: number) => void, encode: boolean): Transform {
  return new Transform({
    transform(chunk: Buffer | string, _encoding, callback) {
      const bytes = encode && typeof chunk === "string" ? Buffer.from(chunk, "utf8") : (chunk as Buffer);
      onBytes(bytes.length);
      callback(null, bytes);
    },
  });
}

/**
 * Opens an upload as UTF-8 text. Refuses (not retryable: the same bytes fail the same way)
 * a file that is not text, before a single record is parsed.
 */
export async function openText(handle: FileHandle, size: number, file: string, options: ImportOptions): Promise<TextSource> {
  const head = Buffer.alloc(Math.min(SNIFF_BYTES, size));
  const { bytesRead } = await handle.read(head, 0, head.length, 0);
  const sample = head.subarray(0, bytesRead);
  const complete = bytesRead >= size;
  const { encoding, bomBytes } = chooseEncoding(sample, options.encoding, complete);
  const text = iconv.decode(sample.subarray(bomBytes), decoderName(encoding), { stripBOM: false });
  const problem = notText(complete ? text : text.slice(0, -2));
  if (problem !== undefined) {
    throw new ImportError(`file "${file}" cannot be imported as CSV: ${problem}`, { retryable: false });
  }
  const delimiter = options.delimiter === "auto" ? detectDelimiter(text, options.quote, complete) : options.delimiter;
  const format = { encoding, delimiter };
  const raw = handle.createReadStream({ start: bomBytes, autoClose: false });
  if (encoding === "utf8") {
    // Checked past the sample too: a file that is UTF-8 for its first 64 KiB may not be after.
    const check = new Utf8Check();
    const input = pipeline(raw, check, () => undefined);
    return { input, format, fileBytes: (n) => bomBytes + n, lineProblem: (endLine) => (check.invalidUpTo(endLine) ? INVALID_UTF8_MESSAGE : undefined) };
  }

  let rawBytes = 0;
  let utf8Bytes = 0;
  // pipeline destroys every stage when one fails or the last is destroyed, so close() reaches the file.
  const input = pipeline(
    raw,
    counter((n) => (rawBytes += n), false),
    iconv.decodeStream(decoderName(encoding), { stripBOM: false }),
    counter((n) => (utf8Bytes += n), true),
    () => undefined,
  );
  return {
    input,
    format,
    fileBytes: (n) => bomBytes + (utf8Bytes === 0 ? 0 : Math.min(rawBytes, Math.round((n * rawBytes) / utf8Bytes))),
  };
}
