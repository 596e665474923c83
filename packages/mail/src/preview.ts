import nodemailer from "nodemailer";
import { MailPayloadError } from "./errors.js";
import type { MailPayload } from "./mail-payload.js";
import { normaliseMessage, toMessage, type MailMessage } from "./payload.js";
import { parseMailPayload } from "./validate.js";

export interface MailPreviewOptions {
  /** Fields used when the payload has none, as for `createMailHandler`. */
  defaults?: MailMessage | undefined;
  /** Read `path` attachments into the preview; default false (they are listed, not read). */
  readFiles?: boolean | undefined;
}

export interface MailPreview {
  /** The message as it would go out (RFC 5322, CRLF), to save as `.eml` and open in a mail client. */
  eml: Buffer;
  /** A self-contained HTML page: the headers, then the HTML body in a sandboxed frame (or the text). */
  html: string;
}

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function addressLine(list: MailPayload["to"]): string {
  return (list ?? []).map((a) => (a.name ? `${a.name} <${a.address}>` : a.address)).join(", ");
}

function bodyText(value: MailPayload["text"]): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === "string" ? value : Buffer.from(value.base64, "base64").toString("utf8");
}

function previewPage(payload: MailPayload): string {
  const rows: Array<[string, string]> = [
    ["From", payload.from ? addressLine([payload.from]) : ""],
    ["To", addressLine(payload.to)],
    ["Cc", addressLine(payload.cc)],
    ["Bcc", addressLine(payload.bcc)],
    ["Subject", payload.subject ?? ""],
    ...(payload.headers ?? []).map((h): [string, string] => [h.key, h.value]),
    ["Attachments", (payload.attachments ?? []).map((a, i) => a.filename ?? a.cid ?? `#${i + 1}`).join(", ")],
  ];
  const head = rows
    .filter(([, value]) => value !== "")
    .map(([name, value]) => `<tr><th>${escapeHtml(name)}</th><td>${escapeHtml(value)}</td></tr>`)
    .join("\n");
  const html = bodyText(payload.html);
  const text = bodyText(payload.text);
  // The mail's HTML runs in a sandbox with no scripts: a preview must not execute what it shows.
  const body =
    html !== undefined
      ? `<iframe sandbox srcdoc="${escapeHtml(html)}" style="width:100%;height:70vh;border:1px solid #ccc"></iframe>`
      : `<pre style="white-space:pre-wrap">${escapeHtml(text ?? "")}</pre>`;
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>${escapeHtml(payload.subject ?? "(no subject)")}</title></head>
<body><table>
${head}
</table>
${body}
</body></html>
`;
}

/**
 * Renders a mail payload (or message) as it would be sent, without sending it: the `.eml`
 * bytes nodemailer would hand the SMTP server, and an HTML page to look at. Validates like
 * the handler does (a bad payload throws `MailPayloadError`).
 */
export async function previewMail(payload: unknown, options: MailPreviewOptions = {}): Promise<MailPreview> {
  const defaults = options.defaults === undefined ? {} : parseMailPayload(normaliseMessage(options.defaults), { requireRecipient: false });
  const valid: MailPayload = { ...defaults, ...parseMailPayload(payload) };
  const attachments = (valid.attachments ?? []).map((attachment) => {
    if (attachment.href !== undefined) return { ...attachment, href: undefined, content: `[fetched from ${attachment.href} when sent]` };
    if (attachment.path !== undefined && !options.readFiles) return { ...attachment, path: undefined, content: `[read from ${attachment.path} when sent]` };
    return attachment;
  });
  const transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "windows" });
  try {
    const info = await transport.sendMail({ ...toMessage({ ...valid, attachments }), disableUrlAccess: true, disableFileAccess: !options.readFiles });
    return { eml: info.message as Buffer, html: previewPage(valid) };
  } catch (error) {
    throw error instanceof MailPayloadError ? error : new MailPayloadError("attachments", `cannot be rendered: ${(error as Error).message}`);
  }
}
