/**
 * What the first bytes of an upload say about it, before any record is parsed: its
 * encoding (byte order mark, then whether it is valid UTF-8), whether it is text at all,
 * and which of the usual delimiters separates its fields.
 */

/** Encodings a payload may declare; `auto` detects one of the others from the file. */
export const IMPORT_ENCODINGS = ["auto", "utf8", "utf16le", "utf16be", "windows-1252", "latin1"] as const;
export type ImportEncoding = (typeof IMPORT_ENCODINGS)[number];
export type TextEncoding = Exclude<ImportEncoding, "auto">;

/** Delimiters `auto` chooses among: Excel writes `;` in many locales, `\t` for "text" exports. */
export const DELIMITER_CANDIDATES = [",", ";", "\t", "|"] as const;

/** Enough for the encoding and the delimiter, small enough to read before every import. */
export const SNIFF_BYTES = 64 * 1024;

export interface EncodingChoice {
  encoding: TextEncoding;
  /** Bytes of byte order mark at the start of the file, skipped before decoding. */
  bomBytes: number;
}

function bomOf(head: Uint8Array): EncodingChoice | undefined {
  if (head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) return { encoding: "utf8", bomBytes: 3 };
  if (head[0] === 0xff && head[1] === 0xfe) return { encoding: "utf16le", bomBytes: 2 };
  if (head[0] === 0xfe && head[1] === 0xff) return { encoding: "utf16be", bomBytes: 2 };
  return undefined;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

// The sample may end inside a multi-byte character: drop an incomplete tail before judging.
function isUtf8(head: Uint8Array, complete: boolean): boolean {
  let end = head.length;
  if (!complete) {
    let back = 0;
    while (back < 3 && end - back - 1 >= 0 && (head[end - back - 1]! & 0xc0) === 0x80) back += 1;
    const lead = head[end - back - 1];
    if (lead !== undefined && lead >= 0xc0) end = end - back - 1;
  }
  try {
    strictUtf8.decode(head.subarray(0, end));
    return true;
  } catch {
    return false;
  }
}

/**
 * A byte order mark wins over a declaration (a file saved as UTF-16 is UTF-16 whatever the
 * form said); without one, `auto` takes UTF-8 when the sample is valid UTF-8, else
 * Windows-1252 (a superset of Latin-1 for text, what Excel writes on Western Windows).
 */
export function chooseEncoding(head: Uint8Array, declared: ImportEncoding, complete: boolean): EncodingChoice {
  const bom = bomOf(head);
  if (bom !== undefined) return bom;
  if (declared !== "auto") return { encoding: declared, bomBytes: 0 };
  return { encoding: isUtf8(head, complete) ? "utf8" : "windows-1252", bomBytes: 0 };
}

// C0 controls other than tab, line feed, form feed and carriage return never occur in text.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b\u000e-\u001f\u007f]/g;

/** Why `sample` (decoded text) is not a text file, or undefined when it is one. */
export function notText(sample: string): string | undefined {
  if (sample.includes("\u0000")) return "it holds NUL bytes (a binary file, or UTF-16 without a byte order mark)";
  const controls = sample.match(CONTROL)?.length ?? 0;
  if (controls > 0) return `it holds ${controls} control character${controls === 1 ? "" : "s"} in its first ${sample.length} characters (a binary file?)`;
  if (sample.length > 0 && (sample.match(/\ufffd/g)?.length ?? 0) > sample.length / 10) return "most of its bytes are not valid in its encoding";
  return undefined;
}

// Quoted fields may hold delimiters and line breaks: blank them out before counting.
function unquoted(sample: string, quote: string): string {
  if (quote === "") return sample;
  const q = quote.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return sample.replace(new RegExp(`${q}(?:[^${q}]|${q}${q})*${q}`, "g"), "x");
}

/**
 * The delimiter that splits the first lines into the same number of fields, preferring
 * more fields, then the order of DELIMITER_CANDIDATES. A one-column file gets ",".
 */
export function detectDelimiter(sample: string, quote: string, complete: boolean): string {
  const lines = unquoted(sample, quote).split(/\r\n|\n|\r/);
  if (!complete && lines.length > 1) lines.pop();
  const sampled = lines.filter((line) => line !== "").slice(0, 20);
  let best: { delimiter: string; consistent: number; fields: number } | undefined;
  for (const delimiter of DELIMITER_CANDIDATES) {
    const counts = sampled.map((line) => line.split(delimiter).length - 1);
    const first = counts[0] ?? 0;
    if (first === 0) continue;
    const consistent = counts.filter((n) => n === first).length / counts.length;
    if (best === undefined || consistent > best.consistent || (consistent === best.consistent && first > best.fields)) {
      best = { delimiter, consistent, fields: first };
    }
  }
  return best?.delimiter ?? ",";
}
