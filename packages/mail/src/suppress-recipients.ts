import type { MailPayload } from "./mail-payload.js";
import { suppresses, type SuppressedRecipient, type SuppressionList } from "./suppression.js";

const RECIPIENT_FIELDS = ["to", "cc", "bcc"] as const;

/** Bulk mail, for the suppression list: a message that offers an unsubscribe link (RFC 2369 / 8058). */
export function isBulk(payload: MailPayload): boolean {
  return (payload.headers ?? []).some((header) => header.key.toLowerCase() === "list-unsubscribe");
}

export interface FilteredRecipients {
  /** The payload without the suppressed recipients (the same object when none is). */
  payload: MailPayload;
  suppressed: SuppressedRecipient[];
  /** True when no recipient is left: nothing is to be sent. */
  empty: boolean;
}

/**
 * Looks every recipient up (to, cc and bcc) and takes out those the list holds back for
 * this message: an unsubscribe holds back bulk mail only, the other reasons every mail.
 */
export async function withoutSuppressed(payload: MailPayload, list: SuppressionList): Promise<FilteredRecipients> {
  const all = RECIPIENT_FIELDS.flatMap((field) => (payload[field] ?? []).map((recipient) => recipient.address));
  const bulk = isBulk(payload);
  const found = (await list.isSuppressed(all)).filter((entry) => suppresses(entry.reason, bulk));
  if (found.length === 0) return { payload, suppressed: [], empty: false };
  const held = new Set(found.map((entry) => entry.address));
  const kept: MailPayload = { ...payload };
  for (const field of RECIPIENT_FIELDS) {
    const recipients = payload[field];
    if (recipients === undefined) continue;
    const left = recipients.filter((recipient) => !held.has(recipient.address));
    if (left.length > 0) kept[field] = left;
    else delete kept[field];
  }
  const suppressed = [...new Map(found.map((entry) => [entry.address, entry])).values()];
  return { payload: kept, suppressed, empty: RECIPIENT_FIELDS.every((field) => kept[field] === undefined) };
}
