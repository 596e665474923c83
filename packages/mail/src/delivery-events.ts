import type { DeliveryEvent } from "./delivery-event.js";
import { dsnEvents, parseDeliveryStatus } from "./dsn.js";
import { leafParts, parseFields, splitPart } from "./mime.js";
import type { SuppressionInput, SuppressionList } from "./suppression.js";

/** The complaint of an RFC 5965 feedback report (a mailbox provider's feedback loop). */
function arfEvents(raw: string): DeliveryEvent[] {
  const parts = leafParts(raw);
  const report = parts.find((p) => p.type === "message/feedback-report");
  if (!report) return [];
  const fields = parseFields(report.content);
  const feedbackType = fields.get("feedback-type")?.toLowerCase();
  // The complained-about recipient: Original-Rcpt-To, else the To of the returned message.
  let address = fields.get("original-rcpt-to")?.replace(/^<(.*)>$/, "$1");
  if (!address) {
    const original = parts.find((p) => p.type === "message/rfc822" || p.type === "text/rfc822-headers");
    const to = original ? splitPart(original.content).headers.get("to") : undefined;
    address = to ? (/<([^>]+)>/.exec(to)?.[1] ?? to.split(",")[0]?.trim()) : undefined;
  }
  if (!address) return [];
  return [{ type: "complaint", address, status: feedbackType, detail: `feedback report: ${feedbackType ?? "unknown type"}`, source: "arf" }];
}

/**
 * The events in a message received back by the application (at its bounce address): an
 * RFC 3464 delivery status notification or an RFC 5965 complaint. An ordinary message
 * (an auto-reply, a person's answer) gives no event.
 */
export function deliveryEventsFromMessage(raw: string | Uint8Array): DeliveryEvent[] {
  const text = typeof raw === "string" ? raw : Buffer.from(raw).toString("utf8");
  const dsn = parseDeliveryStatus(text);
  return dsn ? dsnEvents(dsn) : arfEvents(text);
}

/** The suppression entries the events call for: hard bounces and complaints, nothing else. */
export function suppressionsFromEvents(events: readonly DeliveryEvent[]): SuppressionInput[] {
  return events
    .filter((event) => event.type === "hard-bounce" || event.type === "complaint")
    .map((event) => ({
      address: event.address,
      reason: event.type === "complaint" ? "complaint" : "hard-bounce",
      detail: `${event.source}: ${event.detail}`,
    }));
}

/** Adds the hard bounces and complaints among `events` to `list`; resolves with what was added. */
export async function recordDeliveryEvents(list: SuppressionList, events: readonly DeliveryEvent[]): Promise<SuppressionInput[]> {
  const entries = suppressionsFromEvents(events);
  if (entries.length > 0) await list.add(entries);
  return entries;
}
