import { refuseAddressHeader } from "./address-headers.js";
import { isEmailAddress, type MailAddress } from "./address.js";
import { base64ByteLength, isBase64Bytes, type Base64Bytes } from "./bytes.js";
import { MailPayloadError } from "./errors.js";
import type { MailAttachmentPayload, MailHeader, MailPayload } from "./mail-payload.js";
import { rejectLineBreaks } from "./text.js";

/** 5 MiB: the default ceiling for one inline attachment (`messageToPayload`). */
export const DEFAULT_MAX_ATTACHMENT_BYTES = 5 * 1024 * 1024;

export interface ParseOptions {
  /** Largest inline attachment in bytes; unlimited unless given. */
  maxAttachmentBytes?: number;
  /** False for partial payloads such as handler defaults. */
  requireRecipient?: boolean;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

const PAYLOAD_FIELDS = ["from", "to", "cc", "bcc", "replyTo", "subject", "text", "html", "headers", "attachments", "date"];
const ATTACHMENT_FIELDS = ["filename", "contentType", "cid", "contentDisposition", "content", "encoding", "path", "href"];
const ATTACHMENT_TEXT_FIELDS = ["filename", "contentType", "cid", "path", "href"] as const;
const ADDRESS_LISTS = ["to", "cc", "bcc", "replyTo"] as const;
const DISPOSITIONS = new Set(["attachment", "inline"]);
// RFC 5322 field-name: printable US-ASCII except colon.
const HEADER_NAME = /^[!-9;-~]+$/;

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

function rejectUnknownFields(prefix: string, value: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (key !== "v" && !known.includes(key) && value[key] !== undefined) {
      throw new MailPayloadError(`${prefix}${key}`, `is not supported (known fields: ${known.join(", ")})`);
    }
  }
}

function text(field: string, value: unknown): string {
  if (typeof value !== "string") throw new MailPayloadError(field, "must be a string");
  return value;
}

function headerText(field: string, value: unknown): string {
  const checked = text(field, value);
  rejectLineBreaks(field, checked);
  return checked;
}

function address(field: string, value: unknown): MailAddress {
  if (!isRecord(value)) throw new MailPayloadError(field, "must be a { name, address } object");
  rejectUnknownFields(`${field}.`, value, ["name", "address"]);
  const name = headerText(`${field}.name`, value.name ?? "");
  const mailbox = headerText(field, value.address);
  if (!isEmailAddress(mailbox)) throw new MailPayloadError(field, `'${mailbox}' is not an email address`);
  return { name, address: mailbox };
}

function addressList(field: string, value: unknown): MailAddress[] {
  if (!Array.isArray(value)) throw new MailPayloadError(field, "must be a list of { name, address } objects");
  return value.map((item, i) => address(`${field}[${i}]`, item));
}

function content(field: string, value: unknown): string | Base64Bytes {
  if (typeof value === "string") return value;
  if (isBase64Bytes(value)) return { base64: value.base64 };
  throw new MailPayloadError(field, "must be a string or { base64 } bytes");
}

function headers(value: unknown): MailHeader[] {
  if (!Array.isArray(value)) throw new MailPayloadError("headers", "must be a list of { key, value } objects");
  return value.map((item, i) => {
    if (!isRecord(item)) throw new MailPayloadError(`headers[${i}]`, "must be a { key, value } object");
    const key = text(`headers[${i}].key`, item.key);
    if (!HEADER_NAME.test(key)) throw new MailPayloadError(`headers[${i}].key`, `'${key}' is not a valid header name`);
    refuseAddressHeader(`headers[${i}].key`, key);
    return { key, value: headerText(`headers.${key}`, item.value) };
  });
}

function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / (1024 * 1024)).toFixed(1)} MiB` : `${bytes} bytes`;
}

function attachment(index: number, value: unknown, maxBytes: number): MailAttachmentPayload {
  const field = `attachments[${index}]`;
  if (!isRecord(value)) throw new MailPayloadError(field, "must be an object");
  rejectUnknownFields(`${field}.`, value, ATTACHMENT_FIELDS);
  const out: Mutable<MailAttachmentPayload> = {};
  for (const key of ATTACHMENT_TEXT_FIELDS) {
    if (value[key] !== undefined) out[key] = headerText(`${field}.${key}`, value[key]);
  }
  if (value.contentDisposition !== undefined) {
    const disposition = text(`${field}.contentDisposition`, value.contentDisposition);
    if (!DISPOSITIONS.has(disposition)) {
      throw new MailPayloadError(`${field}.contentDisposition`, `must be 'attachment' or 'inline', not '${disposition}'`);
    }
    out.contentDisposition = disposition as "attachment" | "inline";
  }
  const sources = ["content", "path", "href"].filter((key) => value[key] !== undefined);
  if (sources.length !== 1) {
    throw new MailPayloadError(field, `needs exactly one of content, path or href (got ${sources.join(", ") || "none"})`);
  }
  if (value.content !== undefined) out.content = content(`${field}.content`, value.content);
  if (value.encoding !== undefined) {
    const encoding = text(`${field}.encoding`, value.encoding);
    if (typeof out.content !== "string") {
      throw new MailPayloadError(`${field}.encoding`, "only applies to string content");
    }
    if (!Buffer.isEncoding(encoding)) throw new MailPayloadError(`${field}.encoding`, `'${encoding}' is not a known encoding`);
    out.encoding = encoding;
  }
  if (out.content !== undefined) {
    const size =
      typeof out.content === "string" ? Buffer.byteLength(out.content, (out.encoding as BufferEncoding | undefined) ?? "utf8") : base64ByteLength(out.content);
    if (size > maxBytes) {
      const name = out.filename === undefined ? "" : ` ('${out.filename}')`;
      throw new MailPayloadError(
        field,
        `${formatBytes(size)}${name} is over the ${formatBytes(maxBytes)} limit for inline attachments; ` +
          "attach it by reference (path or href) or raise maxAttachmentBytes",
      );
    }
  }
  return out;
}

function isoDate(value: unknown): string {
  const raw = text("date", value);
  const time = Date.parse(raw);
  if (Number.isNaN(time)) throw new MailPayloadError("date", `'${raw}' is not a date`);
  return new Date(time).toISOString();
}

/**
 * Checks an untrusted value (a job's payload, read back from the database) and returns a
 * clean copy. Throws `MailPayloadError` at the first problem, naming the field.
 */
export function parseMailPayload(value: unknown, options: ParseOptions = {}): MailPayload {
  const { maxAttachmentBytes = Number.POSITIVE_INFINITY, requireRecipient = true } = options;
  if (!isRecord(value)) throw new MailPayloadError("payload", "must be an object (build it with messageToPayload)");
  if (value.v !== 1) {
    throw new MailPayloadError(
      "v",
      value.v === undefined
        ? "is missing: this is not a mail payload (build it with messageToPayload)"
        : `unsupported payload version ${JSON.stringify(value.v)} (this @forge/mail reads version 1)`,
    );
  }
  rejectUnknownFields("", value, PAYLOAD_FIELDS);
  const payload: MailPayload = { v: 1 };
  if (value.from !== undefined) payload.from = address("from", value.from);
  for (const field of ADDRESS_LISTS) {
    if (value[field] !== undefined) payload[field] = addressList(field, value[field]);
  }
  if (requireRecipient && !payload.to?.length && !payload.cc?.length && !payload.bcc?.length) {
    throw new MailPayloadError("to", "no recipient: give at least one address in to, cc or bcc");
  }
  if (value.subject !== undefined) payload.subject = headerText("subject", value.subject);
  if (value.text !== undefined) payload.text = content("text", value.text);
  if (value.html !== undefined) payload.html = content("html", value.html);
  if (value.headers !== undefined) payload.headers = headers(value.headers);
  if (value.attachments !== undefined) {
    if (!Array.isArray(value.attachments)) throw new MailPayloadError("attachments", "must be a list");
    payload.attachments = value.attachments.map((item, i) => attachment(i, item, maxAttachmentBytes));
  }
  if (value.date !== undefined) payload.date = isoDate(value.date);
  return payload;
}

/** True when `value` is a payload the mail handler would accept. */
export function isMailPayload(value: unknown): value is MailPayload {
  try {
    parseMailPayload(value);
    return true;
  } catch (error) {
    if (error instanceof MailPayloadError) return false;
    throw error;
  }
}
