import { createVerify } from "node:crypto";
import type { DeliveryEvent } from "./delivery-event.js";
import { isHardBounceStatus } from "./dsn.js";

/**
 * What an Amazon SES notification endpoint receives, after `parseSesNotification`: SNS's
 * subscription handshake, or the bounce and complaint events of one notification.
 */
export type SesNotification =
  | { type: "subscription-confirmation"; topicArn: string; subscribeUrl: string }
  | { type: "unsubscribe-confirmation"; topicArn: string }
  | { type: "events"; topicArn: string | undefined; events: DeliveryEvent[] };

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function fail(problem: string): never {
  throw new TypeError(`parseSesNotification: ${problem}`);
}

function recipientsOf(section: Json, key: string): Json[] {
  const list = section[key];
  if (!Array.isArray(list)) fail(`${key} must be an array`);
  return list.filter(isObject);
}

/** SES's own verdict decides: `Permanent` is a hard bounce, `Transient` and `Undetermined` are not. */
function sesEvents(message: Json): DeliveryEvent[] {
  const kind = text(message.notificationType) ?? text(message.eventType);
  if (kind === "Bounce") {
    const bounce = isObject(message.bounce) ? message.bounce : fail("a Bounce notification has no bounce object");
    const hard = bounce.bounceType === "Permanent";
    return recipientsOf(bounce, "bouncedRecipients").flatMap((recipient): DeliveryEvent[] => {
      const address = text(recipient.emailAddress);
      if (!address) return [];
      const status = text(recipient.status);
      return [
        {
          type: hard || (status !== undefined && bounce.bounceType !== "Transient" && isHardBounceStatus(status)) ? "hard-bounce" : "soft-bounce",
          address,
          status,
          detail: text(recipient.diagnosticCode) ?? `${String(bounce.bounceType)}/${String(bounce.bounceSubType)}`,
          source: "ses",
        },
      ];
    });
  }
  if (kind === "Complaint") {
    const complaint = isObject(message.complaint) ? message.complaint : fail("a Complaint notification has no complaint object");
    const feedback = text(complaint.complaintFeedbackType);
    return recipientsOf(complaint, "complainedRecipients").flatMap((recipient): DeliveryEvent[] => {
      const address = text(recipient.emailAddress);
      return address ? [{ type: "complaint", address, status: feedback, detail: `complaint: ${feedback ?? "unspecified"}`, source: "ses" }] : [];
    });
  }
  // Delivery, Send, Open, Click…: nothing for the suppression list.
  return [];
}

/**
 * Reads what Amazon SES posts through an SNS HTTPS subscription (the SNS envelope, with
 * the SES notification as a JSON string in `Message`), or a raw-delivery SES notification.
 * Verify the envelope first (`verifySnsSignature`): anyone can post to a public URL.
 */
export function parseSesNotification(body: unknown): SesNotification {
  const envelope: unknown = typeof body === "string" ? JSON.parse(body) : body;
  if (!isObject(envelope)) fail("the body must be a JSON object");
  if (envelope.notificationType !== undefined || envelope.eventType !== undefined) {
    return { type: "events", topicArn: undefined, events: sesEvents(envelope) };
  }
  const topicArn = text(envelope.TopicArn) ?? fail("not an SNS message (no TopicArn) nor an SES notification");
  switch (envelope.Type) {
    case "SubscriptionConfirmation":
      return { type: "subscription-confirmation", topicArn, subscribeUrl: text(envelope.SubscribeURL) ?? fail("SubscribeURL is missing") };
    case "UnsubscribeConfirmation":
      return { type: "unsubscribe-confirmation", topicArn };
    case "Notification": {
      const raw = text(envelope.Message) ?? fail("Message is missing");
      let message: unknown;
      try {
        message = JSON.parse(raw);
      } catch {
        fail("Message is not JSON (is the topic fed by SES?)");
      }
      if (!isObject(message)) fail("Message must be a JSON object");
      return { type: "events", topicArn, events: sesEvents(message) };
    }
    default:
      fail(`unknown SNS message Type ${JSON.stringify(envelope.Type)}`);
  }
}

const SIGNED_KEYS: Record<string, readonly string[]> = {
  Notification: ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"],
  SubscriptionConfirmation: ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"],
  UnsubscribeConfirmation: ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"],
};

/** The URL SNS names for its certificate is one of Amazon's own, over HTTPS: fetch nothing else. */
export function isSnsCertificateUrl(url: unknown): boolean {
  if (typeof url !== "string") return false;
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" && /^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/.test(parsed.hostname) && parsed.pathname.endsWith(".pem");
  } catch {
    return false;
  }
}

/**
 * Checks an SNS message's signature (SignatureVersion 1, SHA1, or 2, SHA256) against the
 * certificate the application fetched from `SigningCertURL` (after `isSnsCertificateUrl`,
 * and cached). False on any mismatch.
 */
export function verifySnsSignature(envelope: unknown, certificate: string): boolean {
  if (!isObject(envelope) || typeof envelope.Type !== "string" || typeof envelope.Signature !== "string") return false;
  const keys = SIGNED_KEYS[envelope.Type];
  const algorithm = envelope.SignatureVersion === "1" ? "RSA-SHA1" : envelope.SignatureVersion === "2" ? "RSA-SHA256" : undefined;
  if (!keys || !algorithm) return false;
  const signed = keys
    .filter((key) => typeof envelope[key] === "string")
    .map((key) => `${key}\n${envelope[key] as string}\n`)
    .join("");
  try {
    return createVerify(algorithm).update(signed, "utf8").verify(certificate, envelope.Signature, "base64");
  } catch {
    return false;
  }
}
