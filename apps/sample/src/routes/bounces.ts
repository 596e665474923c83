import { createHash, timingSafeEqual } from "node:crypto";
import {
  deliveryEventsFromMessage,
  isSnsCertificateUrl,
  parseSesNotification,
  recordDeliveryEvents,
  verifySnsSignature,
  type DeliveryEvent,
  type SesNotification,
} from "@forge/mail";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { AppConfig } from "../config.js";
import type { AppDatabase } from "../db.js";
import { PROBLEM_TYPES, sendProblem } from "../problems.js";
import { suppressionList } from "../suppression.js";

/** What the SES webhook asks of Amazon SNS over the network; tests pass their own. */
export interface SnsClient {
  /** The PEM at a SigningCertURL (already checked to be an https URL of sns.<region>.amazonaws.com). */
  certificate(url: string): Promise<string>;
  /** Opens a subscription's SubscribeURL, which confirms it. */
  confirm(subscribeUrl: string): Promise<void>;
}

/** SNS signs with a handful of certificates: fetched once each, kept for the process. */
export function httpsSnsClient(): SnsClient {
  const certificates = new Map<string, Promise<string>>();
  return {
    certificate(url) {
      let pem = certificates.get(url);
      if (pem === undefined) {
        pem = fetch(url, { redirect: "error" }).then(async (response) => {
          if (!response.ok) throw new Error(`SNS certificate ${url}: HTTP ${response.status}`);
          return response.text();
        });
        // A failed fetch is not kept, or one network error would refuse every notification.
        pem.catch(() => certificates.delete(url));
        certificates.set(url, pem);
      }
      return pem;
    },
    async confirm(subscribeUrl) {
      const response = await fetch(subscribeUrl, { redirect: "error" });
      if (!response.ok) throw new Error(`SNS subscription confirmation: HTTP ${response.status}`);
    },
  };
}

function sameToken(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

function refuse(reply: FastifyReply, status: 401 | 403, detail: string): FastifyReply {
  return sendProblem(reply, { type: PROBLEM_TYPES.unauthorized, title: status === 401 ? "Unauthorized" : "Forbidden", status, detail });
}

/** The answer of both routes: what the message said, and which addresses went on the list. */
async function record(db: AppDatabase, events: DeliveryEvent[]) {
  const added = await recordDeliveryEvents(suppressionList(db), events);
  return {
    events: events.map((e) => ({ type: e.type, address: e.address, status: e.status ?? null })),
    suppressed: added.map((entry) => ({ address: entry.address, reason: entry.reason })),
  };
}

/**
 * Bounces and complaints in, feeding the suppression list (hard bounces and complaints; a
 * soft bounce is reported but not listed):
 *
 * - `POST /bounces` (when BOUNCE_TOKEN is set): a raw message received at the bounce address,
 *   an RFC 3464 DSN or an RFC 5965 (ARF) complaint, posted by the inbound mail server's pipe
 *   with `Authorization: Bearer <BOUNCE_TOKEN>`;
 * - `POST /webhooks/ses` (when SES_TOPIC_ARN is set): Amazon SES notifications through an SNS
 *   HTTPS subscription. Anyone can post to a public URL, so the signature is checked against
 *   SNS's certificate and the topic must be ours before anything is read.
 */
export function bounceRoutes(app: FastifyInstance, db: AppDatabase, config: Pick<AppConfig, "bounceToken" | "sesTopicArn">, sns: SnsClient): void {
  const { bounceToken, sesTopicArn } = config;

  if (bounceToken) {
    void app.register(async (scope) => {
      scope.addContentTypeParser(["message/rfc822", "application/octet-stream"], { parseAs: "buffer", bodyLimit: 1024 * 1024 }, (_request, body, done) =>
        done(null, body),
      );
      scope.post("/bounces", async (request, reply) => {
        const header = request.headers.authorization ?? "";
        if (!header.startsWith("Bearer ") || !sameToken(header.slice(7), bounceToken)) {
          return refuse(reply, 401, "POST /bounces needs Authorization: Bearer <BOUNCE_TOKEN>");
        }
        const result = await record(db, deliveryEventsFromMessage(request.body as Buffer));
        request.log.info({ events: result.events.length, suppressed: result.suppressed.length }, "bounce message read");
        return reply.code(200).send(result);
      });
    });
  }

  if (sesTopicArn) {
    void app.register(async (scope) => {
      // SNS posts its JSON as text/plain; the signature is checked on the text as received.
      scope.removeContentTypeParser("application/json");
      scope.addContentTypeParser(["text/plain", "application/json"], { parseAs: "string", bodyLimit: 512 * 1024 }, (_request, body, done) => done(null, body));
      scope.post("/webhooks/ses", async (request, reply) => {
        let envelope: { SigningCertURL?: unknown; TopicArn?: unknown };
        try {
          envelope = JSON.parse(request.body as string) as typeof envelope;
        } catch {
          return refuse(reply, 403, "not an SNS message");
        }
        if (envelope?.TopicArn !== sesTopicArn) return refuse(reply, 403, "not a message of the configured SES_TOPIC_ARN");
        if (!isSnsCertificateUrl(envelope.SigningCertURL)) return refuse(reply, 403, "SigningCertURL is not an https URL of Amazon SNS");
        if (!verifySnsSignature(envelope, await sns.certificate(envelope.SigningCertURL as string))) {
          return refuse(reply, 403, "the SNS signature does not match the message");
        }
        let notification: SesNotification;
        try {
          notification = parseSesNotification(envelope);
        } catch (error) {
          return sendProblem(reply, { type: PROBLEM_TYPES.validation, title: "Invalid request", status: 400, detail: (error as Error).message });
        }
        if (notification.type === "subscription-confirmation") {
          await sns.confirm(notification.subscribeUrl);
          request.log.info({ topicArn: notification.topicArn }, "SNS subscription confirmed");
          return reply.code(200).send({ confirmed: true });
        }
        if (notification.type === "unsubscribe-confirmation") return reply.code(200).send({ events: [], suppressed: [] });
        const result = await record(db, notification.events);
        request.log.info({ events: result.events.length, suppressed: result.suppressed.length }, "SES notification read");
        return reply.code(200).send(result);
      });
    });
  }
}
