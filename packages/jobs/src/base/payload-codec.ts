import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { JobError } from "./errors.js";

/**
 * Turns the text of a payload, a result or an error message into what is stored, and back
 * (`connect(url, { payloadCodec })`). Both directions are synchronous: they run inside the
 * enqueue's and the completion's statements. `decode` gets only texts `encode` produced; a
 * key it lacks, or a text it cannot authenticate, is a thrown error saying so.
 */
export interface PayloadCodec {
  encode(plaintext: string): string;
  decode(ciphertext: string): string;
}

/** What marks a stored text as the codec's: rows from before the codec are read as they are. */
export const SEALED_PREFIX = "$sealed:";

/** The text as stored: sealed when the database has a codec. */
export function sealText(codec: PayloadCodec | null | undefined, text: string): string {
  return codec ? SEALED_PREFIX + codec.encode(text) : text;
}

/** JSON text as stored in a JSON column: a JSON string holding the sealed text, so jsonb and JSON columns take it. */
export function sealJson(codec: PayloadCodec | null | undefined, json: string): string {
  return codec ? JSON.stringify(sealText(codec, json)) : json;
}

function isSealed(value: unknown): value is string {
  return typeof value === "string" && value.startsWith(SEALED_PREFIX);
}

/** A stored text, opened when sealed and the database has the codec; without it, the sealed text as it is. */
export function openText<T>(codec: PayloadCodec | null | undefined, value: T): T | string {
  return codec && isSealed(value) ? codec.decode(value.slice(SEALED_PREFIX.length)) : value;
}

/** A JSON column's value (already parsed), opened like openText and parsed again. */
export function openJson(codec: PayloadCodec | null | undefined, value: unknown): unknown {
  return codec && isSealed(value) ? (JSON.parse(codec.decode(value.slice(SEALED_PREFIX.length))) as unknown) : value;
}

export interface AesGcmCodecOptions {
  /** Key id → 32-byte key (a Buffer/Uint8Array, or its base64). Keep old keys here after a rotation: their rows still decrypt. */
  keys: Record<string, Uint8Array | string>;
  /** The id of the key new texts are encrypted with. */
  current: string;
}

const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;

function keyBytes(id: string, key: Uint8Array | string): Buffer {
  const bytes = typeof key === "string" ? Buffer.from(key, "base64") : Buffer.from(key);
  if (bytes.length !== 32) {
    throw new JobError(`aesGcmCodec: key "${id}" must be 32 bytes (AES-256), got ${bytes.length} (e.g. crypto.randomBytes(32), or its base64)`, "keys");
  }
  return bytes;
}

/**
 * AES-256-GCM with node:crypto: each text gets a random 12-byte IV; the stored form is
 * `<key id>.<base64url of IV, tag, ciphertext>`, the key id bound as associated data, so a text
 * names the key that opens it and old rows decrypt after `current` moves to a new key.
 */
export function aesGcmCodec(options: AesGcmCodecOptions): PayloadCodec {
  if (typeof options !== "object" || options === null || typeof options.keys !== "object" || options.keys === null) {
    throw new JobError("aesGcmCodec needs { keys: { <id>: <32-byte key> }, current: <id> }", "keys");
  }
  const keys = new Map<string, Buffer>();
  for (const [id, key] of Object.entries(options.keys)) {
    if (!KEY_ID.test(id)) throw new JobError(`aesGcmCodec: key id ${JSON.stringify(id)} must be 1–64 letters, digits, _ or -`, "keys");
    keys.set(id, keyBytes(id, key));
  }
  const current = options.current;
  if (typeof current !== "string" || !keys.has(current)) {
    throw new JobError(
      `aesGcmCodec: current must be one of the key ids (${[...keys.keys()].join(", ") || "none given"}), got ${JSON.stringify(current)}`,
      "current",
    );
  }
  const currentKey = keys.get(current)!;
  return {
    encode(plaintext) {
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", currentKey, iv);
      cipher.setAAD(Buffer.from(current));
      const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
      return `${current}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url")}`;
    },
    decode(ciphertext) {
      const dot = ciphertext.indexOf(".");
      const id = dot < 0 ? "" : ciphertext.slice(0, dot);
      const key = keys.get(id);
      if (!key) {
        throw new JobError(
          `cannot decrypt: the text was encrypted with key "${id}", which this codec does not have (it has ${[...keys.keys()].join(", ")}); keep "${id}" in aesGcmCodec's keys until no row uses it`,
          "payloadCodec",
        );
      }
      const data = Buffer.from(ciphertext.slice(dot + 1), "base64url");
      try {
        const decipher = createDecipheriv("aes-256-gcm", key, data.subarray(0, 12));
        decipher.setAAD(Buffer.from(id));
        decipher.setAuthTag(data.subarray(12, 28));
        return Buffer.concat([decipher.update(data.subarray(28)), decipher.final()]).toString("utf8");
      } catch {
        throw new JobError(`cannot decrypt with key "${id}": it is not the key that encrypted this text, or the text was altered`, "payloadCodec");
      }
    },
  };
}
