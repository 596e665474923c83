import type { MailAddress } from "./address.js";
import type { Base64Bytes } from "./bytes.js";

// The stored shape alone, apart from the conversions (payload.ts) and the checks (validate.ts):
// both need it, and the conversions call the checks.

/** One header line; a header given several values appears once per value. */
export interface MailHeader {
  key: string;
  value: string;
}

export interface MailAttachmentPayload {
  filename?: string;
  contentType?: string;
  cid?: string;
  contentDisposition?: "attachment" | "inline";
  /** Inline content: text, or bytes as `{ base64 }`. */
  content?: string | Base64Bytes;
  /** With string content only: how nodemailer turns it into bytes ("base64", "hex", …). */
  encoding?: string;
  /** A file the worker reads when it sends (by reference: nothing stored in the job). */
  path?: string;
  /** A URL the worker fetches when it sends (by reference: nothing stored in the job). */
  href?: string;
}

/**
 * What a mail job stores: plain JSON, versioned so that a worker running a later
 * release still recognises rows written by an earlier one.
 */
export interface MailPayload {
  v: 1;
  from?: MailAddress;
  to?: MailAddress[];
  cc?: MailAddress[];
  bcc?: MailAddress[];
  replyTo?: MailAddress[];
  subject?: string;
  text?: string | Base64Bytes;
  html?: string | Base64Bytes;
  headers?: MailHeader[];
  attachments?: MailAttachmentPayload[];
  /** ISO 8601. */
  date?: string;
}
