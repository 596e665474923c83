import type { Readable } from "node:stream";
import { parse, type CsvError, type Parser } from "csv-parse";
import { MAX_RECORD_BYTES } from "./limits.js";
import type { ImportOptions } from "./payload.js";
import type { CsvRecord, MalformedRecord, RecordSource } from "./record-source.js";

export type CsvReader = RecordSource;

export { MAX_RECORD_BYTES };

const LINE_BREAKS = /\r\n|\r|\n/g;

// Line breaks outside quotes end records, so any inside a record sit in a quoted field,
// verbatim. csv-parse's own `info.lines` counts a CRLF inside quotes twice, hence this.
function lineBreaksIn(fields: readonly string[]): number {
  let count = 0;
  for (const field of fields) {
    if (field.includes("\n") || field.includes("\r")) count += field.match(LINE_BREAKS)?.length ?? 0;
  }
  return count;
}

function describe(error: CsvError): string {
  switch (error.code) {
    case "CSV_QUOTE_NOT_CLOSED":
      return "unclosed quote: the quoted field that starts in this record never ends";
    case "CSV_INVALID_CLOSING_QUOTE":
      return "invalid closing quote: a quoted field must be followed by a delimiter or the end of the line";
    case "CSV_MAX_RECORD_SIZE":
      return `record longer than ${MAX_RECORD_BYTES} bytes (an unclosed quote?)`;
    default:
      return error.message;
  }
}

/**
 * Streams records out of `input` with csv-parse, each with the line it starts on.
 *
 * A malformed record does not destroy the stream (that would drop the records parsed
 * just before it, still buffered): csv-parse is told to skip it, the first one is kept
 * as `malformed()`, and reading stops there, because after a broken quote the parser
 * cannot know where the next record begins.
 *
 * Lines are counted here rather than in a csv-parse `on_record` hook, which builds a
 * context object per record and halves the parse rate.
 */
export function readCsv(
  input: Readable,
  options: ImportOptions,
  fileBytes: (utf8Bytes: number) => number = (n) => n,
  /** What is wrong with the bytes of the lines up to `endLine` not yet asked about, if anything (see text-source.ts). */
  lineProblem: (endLine: number) => string | undefined = () => undefined,
): CsvReader {
  let failure: { records: number; message: string } | undefined;
  let malformed: MalformedRecord | undefined;

  const parser: Parser = parse({
    delimiter: options.delimiter,
    quote: options.quote,
    escape: options.escape,
    // The input is UTF-8 already (text-source.ts decodes every other encoding).
    encoding: "utf8",
    bom: true,
    // All three endings at once: auto-detection would settle on the first one seen.
    record_delimiter: ["\r\n", "\n", "\r"],
    // Empty lines come through as [""] so that every line is counted here; see below.
    skip_empty_lines: false,
    // Column counts are checked by the handler, which reports ragged rows as data.
    relax_column_count: true,
    max_record_size: MAX_RECORD_BYTES,
    skip_records_with_error: true,
    on_skip: (error) => {
      if (failure !== undefined || error === undefined) return undefined;
      failure = { records: parser.info.records, message: describe(error) };
      input.unpipe(parser);
      input.destroy();
      if (!parser.writableEnded) parser.end();
      return undefined;
    },
  });
  // pipe() does not forward errors; without this a failing disk would leave the reader waiting.
  input.on("error", (error) => parser.destroy(error));
  input.pipe(parser);

  async function* records(): AsyncGenerator<CsvRecord> {
    let endLine = 0;
    let emitted = 0;
    for await (const fields of parser as AsyncIterable<string[]>) {
      // Whatever the parser emits after a malformed record is guesswork.
      if (failure !== undefined && emitted >= failure.records) break;
      emitted += 1;
      const line = endLine + 1;
      endLine = line + lineBreaksIn(fields);
      // Asked of every record, skipped ones too, so that a problem is never carried to a later record.
      const problem = lineProblem(endLine);
      // Also skips a line holding only "" in a one-column file: the price of counting lines here.
      if (options.skipEmptyLines && fields.length === 1 && fields[0] === "") continue;
      yield problem === undefined ? { fields, line, endLine } : { fields, line, endLine, problem };
    }
    if (failure !== undefined) malformed = { line: endLine + 1, message: failure.message };
  }

  return {
    records: records(),
    malformed: () => malformed,
    position: () => ({ bytes: fileBytes(parser.info.bytes), records: parser.info.records }),
    close: () => {
      input.destroy();
      parser.destroy();
    },
  };
}
