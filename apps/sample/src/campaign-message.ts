import { createUnsubscribeToken, listUnsubscribeHeaders, messageToPayload, type MailPayload } from "@forge/mail";
import type { AppConfig } from "./config.js";

export type UnsubscribeConfig = Pick<AppConfig, "publicUrl" | "unsubscribeSecret">;

/**
 * RFC 8058 one-click unsubscribe headers for one recipient of bulk mail: a signed, expiring
 * token in an HTTPS link to this app's POST /unsubscribe. Empty when PUBLIC_URL (https) and
 * UNSUBSCRIBE_SECRET are not both configured.
 */
export function unsubscribeHeaders(config: UnsubscribeConfig, org: string, email: string): Record<string, string> {
  if (!config.publicUrl?.startsWith("https://") || !config.unsubscribeSecret) return {};
  const token = createUnsubscribeToken(email, { secret: config.unsubscribeSecret, list: org });
  return listUnsubscribeHeaders(`${config.publicUrl.replace(/\/+$/, "")}/unsubscribe?token=${token}`);
}

export interface CampaignMessage {
  subject: string;
  text: string;
}

/** One recipient's campaign mail, as sent and as previewed: bulk mail, so with the unsubscribe headers. */
export function campaignMessage(
  config: Pick<AppConfig, "mailFrom"> & UnsubscribeConfig,
  org: string,
  id: string,
  campaign: CampaignMessage,
  recipient: { email: string; name?: string | undefined },
): MailPayload {
  const email = recipient.email.trim();
  return messageToPayload({
    from: config.mailFrom,
    to: [{ name: recipient.name ?? "", address: email }],
    subject: campaign.subject,
    text: campaign.text,
    headers: { "X-Campaign": `${org}/${id}`, ...unsubscribeHeaders(config, org, email) },
  });
}
