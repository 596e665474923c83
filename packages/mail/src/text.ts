import { MailPayloadError } from "./errors.js";

const LINE_BREAK = /[\r\n]/;

/** Anything that ends up in a header line must not carry CR or LF: it would start a new header. */
export function rejectLineBreaks(field: string, value: string): void {
  if (LINE_BREAK.test(value)) {
    throw new MailPayloadError(field, "contains a line break (CR or LF), which could inject a header");
  }
}
