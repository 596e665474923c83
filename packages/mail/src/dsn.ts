import { leafParts, parseFields } from "./mime.js";
import type { DeliveryEvent } from "./delivery-event.js";

/** One recipient's block of an RFC 3464 delivery status notification. */
export interface DsnRecipient {
  /** The address the report is about (`Final-Recipient`, without its `rfc822;` type). */
  finalRecipient: string;
  originalRecipient: string | undefined;
  /** `failed`, `delayed`, `delivered`, `relayed` or `expanded`. */
  action: string;
  /** The enhanced status code, e.g. `5.1.1`. */
  status: string;
  diagnosticCode: string | undefined;
  remoteMta: string | undefined;
}

/** The `message/delivery-status` part of a bounce (RFC 3464 §2). */
export interface DeliveryStatusReport {
  reportingMta: string | undefined;
  arrivalDate: string | undefined;
  originalEnvelopeId: string | undefined;
  recipients: DsnRecipient[];
}

const STATUS = /^([245])\.(\d{1,3})\.(\d{1,3})$/;

/** `rfc822; alice@example.com` → `alice@example.com`. */
function addressOf(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const semicolon = value.indexOf(";");
  const address = (semicolon === -1 ? value : value.slice(semicolon + 1)).trim().replace(/^<(.*)>$/, "$1");
  return address === "" ? undefined : address;
}

function typed(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const semicolon = value.indexOf(";");
  return (semicolon === -1 ? value : value.slice(semicolon + 1)).trim() || undefined;
}

/** The field groups of a delivery-status body: the per-message one first, then one per recipient. */
function fieldGroups(content: string): Array<Map<string, string>> {
  return content
    .replace(/\r\n/g, "\n")
    .split(/\n[ \t]*\n/)
    .map((block) => parseFields(block))
    .filter((fields) => fields.size > 0);
}

/**
 * Reads the delivery status of a bounce message (a `multipart/report` with a
 * `message/delivery-status` or `message/global-delivery-status` part, RFC 3464 / 6533);
 * `null` when the message carries none.
 */
export function parseDeliveryStatus(raw: string | Uint8Array): DeliveryStatusReport | null {
  const text = typeof raw === "string" ? raw : Buffer.from(raw).toString("utf8");
  const part = leafParts(text).find((p) => p.type === "message/delivery-status" || p.type === "message/global-delivery-status");
  if (!part) return null;
  const [perMessage, ...perRecipient] = fieldGroups(part.content);
  if (!perMessage) return null;
  const recipients: DsnRecipient[] = [];
  for (const fields of perRecipient) {
    const finalRecipient = addressOf(fields.get("final-recipient") ?? fields.get("original-recipient"));
    const status = fields.get("status")?.split(/\s/)[0] ?? "";
    if (finalRecipient === undefined) continue;
    recipients.push({
      finalRecipient,
      originalRecipient: addressOf(fields.get("original-recipient")),
      action: (fields.get("action") ?? "").toLowerCase().split(/\s/)[0] ?? "",
      status,
      diagnosticCode: typed(fields.get("diagnostic-code")),
      remoteMta: typed(fields.get("remote-mta")),
    });
  }
  return {
    reportingMta: typed(perMessage.get("reporting-mta")),
    arrivalDate: perMessage.get("arrival-date"),
    originalEnvelopeId: perMessage.get("original-envelope-id"),
    recipients,
  };
}

/**
 * A generic `x.0.0` status says less than the code in the diagnostic often does
 * (`Status: 5.0.0`, `Diagnostic-Code: smtp; 550 5.2.2 mailbox full`): take the more specific.
 */
function effectiveStatus(recipient: DsnRecipient): string {
  if (!/^\d\.0\.0$/.test(recipient.status)) return recipient.status;
  const inDiagnostic = /\b([245]\.\d{1,3}\.\d{1,3})\b/.exec(recipient.diagnosticCode ?? "")?.[1];
  return inDiagnostic ?? recipient.status;
}

/**
 * Whether a permanent failure is about the address (suppress it) or about this message or
 * a passing state of the mailbox (do not): a full mailbox (5.2.2), a message too large
 * (5.2.3, 5.3.4) or refused by policy or as spam (5.7.x) may pass next time.
 */
export function isHardBounceStatus(status: string): boolean {
  const match = STATUS.exec(status);
  if (!match || match[1] !== "5") return false;
  return !["5.2.2", "5.2.3", "5.3.4"].includes(status) && match[2] !== "7";
}

/** The events of one DSN: a hard or soft bounce per failed or delayed recipient; deliveries are left out. */
export function dsnEvents(report: DeliveryStatusReport): DeliveryEvent[] {
  const events: DeliveryEvent[] = [];
  for (const recipient of report.recipients) {
    if (recipient.action !== "failed" && recipient.action !== "delayed") continue;
    const status = effectiveStatus(recipient);
    events.push({
      type: recipient.action === "failed" && isHardBounceStatus(status) ? "hard-bounce" : "soft-bounce",
      address: recipient.finalRecipient,
      status,
      detail: recipient.diagnosticCode ?? `${recipient.action} ${status}`,
      source: "dsn",
    });
  }
  return events;
}
