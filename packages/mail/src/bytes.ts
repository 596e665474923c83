/**
 * Binary content in a payload. A plain string stays text; bytes become this marker
 * so that JSON (the job's storage) cannot turn a Buffer into `{ type, data }` noise.
 */
export interface Base64Bytes {
  base64: string;
}

// A single character class, not groups of four: a repeated group backtracks through a
// recursion that overflows the stack on a multi-megabyte attachment.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function isBytes(value: unknown): value is Uint8Array {
  return value instanceof Uint8Array;
}

export function encodeBytes(bytes: Uint8Array): Base64Bytes {
  return { base64: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64") };
}

export function decodeBytes(value: Base64Bytes): Buffer {
  return Buffer.from(value.base64, "base64");
}

export function isBase64Bytes(value: unknown): value is Base64Bytes {
  return (
    typeof value === "object" &&
    value !== null &&
    Object.keys(value).length === 1 &&
    typeof (value as { base64?: unknown }).base64 === "string" &&
    (value as Base64Bytes).base64.length % 4 === 0 &&
    BASE64.test((value as Base64Bytes).base64)
  );
}

/** Size of the decoded bytes, computed without decoding. */
export function base64ByteLength(value: Base64Bytes): number {
  const text = value.base64;
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  return (text.length / 4) * 3 - padding;
}
