/** Bounds memory when an unclosed quote would otherwise swallow the rest of a CSV file into one field; also caps an XLSX row or text. */
export const MAX_RECORD_BYTES = 8 * 1024 * 1024;
