import { normaliseAddresses, type MailAddressInput, type MailAddressListInput } from "./address.js";
import { decodeBytes, encodeBytes, isBytes, type Base64Bytes } from "./bytes.js";
import { MailPayloadError } from "./errors.js";
import type { MailAttachmentPayload, MailHeader, MailPayload } from "./mail-payload.js";
import { DEFAULT_MAX_ATTACHMENT_BYTES, isRecord, parseMailPayload } from "./validate.js";

export type { MailAddress, MailAddressInput, MailAddressListInput } from "./address.js";
export type { Base64Bytes } from "./bytes.js";

export interface MailAttachment {
  filename?: string | undefined;
  contentType?: string | undefined;
  cid?: string | undefined;
  contentDisposition?: "attachment" | "inline" | undefined;
  content?: string | Uint8Array | undefined;
  encoding?: string | undefined;
  path?: string | undefined;
  href?: string | undefined;
}

export type MailHeaders = Readonly<Record<string, string | readonly string[]>> | readonly MailHeader[];

/** The subset of nodemailer's message options that a mail job can carry. */
export interface MailMessage {
  from?: string | MailAddressInput | undefined;
  to?: MailAddressListInput | undefined;
  cc?: MailAddressListInput | undefined;
  bcc?: MailAddressListInput | undefined;
  replyTo?: MailAddressListInput | undefined;
  subject?: string | undefined;
  text?: string | Uint8Array | undefined;
  html?: string | Uint8Array | undefined;
  headers?: MailHeaders | undefined;
  attachments?: readonly MailAttachment[] | undefined;
  date?: Date | string | undefined;
}

/** What `payloadToMessage` gives back: ready for `transporter.sendMail`. */
export interface NodemailerMessage extends Omit<MailPayload, "v" | "text" | "html" | "attachments" | "date"> {
  text?: string | Buffer;
  html?: string | Buffer;
  attachments?: NodemailerAttachment[];
  date?: Date;
}

export interface NodemailerAttachment extends Omit<MailAttachmentPayload, "content"> {
  content?: string | Buffer;
}

export interface MessageToPayloadOptions {
  /**
   * Largest inline attachment, in bytes (decoded size). Default 5 MiB
   * (`DEFAULT_MAX_ATTACHMENT_BYTES`): the payload lives in a database row. Larger files
   * go by reference (`path` or `href`), read by the worker at send time.
   */
  maxAttachmentBytes?: number;
}

const ADDRESS_LISTS = ["to", "cc", "bcc", "replyTo"] as const;

function normaliseContent(value: unknown): unknown {
  return isBytes(value) ? encodeBytes(value) : value;
}

function normaliseHeaders(value: unknown): unknown {
  if (Array.isArray(value) || !isRecord(value)) return value;
  return Object.entries(value).flatMap(([key, v]) => (Array.isArray(v) ? (v as unknown[]) : [v]).map((item) => ({ key, value: item })));
}

function normaliseAttachment(value: unknown, index: number): unknown {
  if (!isRecord(value)) return value;
  const { content } = value;
  if (content !== undefined && typeof content !== "string" && !isBytes(content)) {
    throw new MailPayloadError(
      `attachments[${index}].content`,
      "must be a string or a Buffer; a stream cannot be stored in a job (give a path or href instead)",
    );
  }
  return content === undefined ? value : { ...value, content: normaliseContent(content) };
}

function normaliseDate(value: unknown): unknown {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new MailPayloadError("date", "is an invalid Date");
    return value.toISOString();
  }
  return value;
}

/**
 * Turns a nodemailer-style message into payload shape, field for field; unknown fields
 * are kept so that validation names them instead of dropping them silently.
 */
export function normaliseMessage(message: unknown): Record<string, unknown> {
  if (!isRecord(message)) throw new MailPayloadError("message", "must be an object");
  const raw: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(message)) {
    if (value !== undefined) raw[key] = value;
  }
  raw.v = 1;
  if (raw.from !== undefined) {
    const from = normaliseAddresses("from", raw.from, { single: true });
    if (from.length !== 1) throw new MailPayloadError("from", `must be exactly one address (got ${from.length})`);
    raw.from = from[0];
  }
  for (const field of ADDRESS_LISTS) {
    if (raw[field] !== undefined) raw[field] = normaliseAddresses(field, raw[field]);
  }
  if (raw.text !== undefined) raw.text = normaliseContent(raw.text);
  if (raw.html !== undefined) raw.html = normaliseContent(raw.html);
  if (raw.headers !== undefined) raw.headers = normaliseHeaders(raw.headers);
  if (Array.isArray(raw.attachments)) raw.attachments = raw.attachments.map(normaliseAttachment);
  if (raw.date !== undefined) raw.date = normaliseDate(raw.date);
  return raw;
}

/**
 * A nodemailer-style message → a JSON-safe, validated `MailPayload`.
 * Throws `MailPayloadError` (retryable: false) naming the field and the problem.
 */
export function messageToPayload(message: MailMessage, options: MessageToPayloadOptions = {}): MailPayload {
  return parseMailPayload(normaliseMessage(message), {
    maxAttachmentBytes: options.maxAttachmentBytes ?? DEFAULT_MAX_ATTACHMENT_BYTES,
  });
}

function toContent(value: string | Base64Bytes): string | Buffer {
  return typeof value === "string" ? value : decodeBytes(value);
}

/** A payload already validated → the message for `sendMail`. */
export function toMessage(payload: MailPayload): NodemailerMessage {
  const { v: _version, text, html, attachments, date, ...rest } = payload;
  const message: NodemailerMessage = rest;
  if (text !== undefined) message.text = toContent(text);
  if (html !== undefined) message.html = toContent(html);
  if (attachments !== undefined) {
    message.attachments = attachments.map(({ content, ...attachment }) =>
      content === undefined ? attachment : { ...attachment, content: toContent(content) },
    );
  }
  if (date !== undefined) message.date = new Date(date);
  return message;
}

/** A `MailPayload` (validated again: it may have sat in a database) → the nodemailer message. */
export function payloadToMessage(payload: MailPayload): NodemailerMessage {
  return toMessage(parseMailPayload(payload));
}
