import { generateKeyPairSync, createSign } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createSqlSuppressionList,
  type DeliveryEvent,
  deliveryEventsFromMessage,
  isSnsCertificateUrl,
  parseDeliveryStatus,
  parseSesNotification,
  recordDeliveryEvents,
  suppressionsFromEvents,
  suppressionTableSql,
  verifySnsSignature,
} from "../src/index.js";
import { BACKENDS, type TestDatabase } from "./helpers/databases.js";

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const json = (name: string): unknown => JSON.parse(fixture(name)) as unknown;

describe("RFC 3464 delivery status notifications", () => {
  it("reads a Postfix bounce: per-message and per-recipient fields, folded diagnostic", () => {
    const report = parseDeliveryStatus(fixture("dsn-postfix-user-unknown.eml"));
    expect(report).toEqual({
      reportingMta: "mx.shop.example.org",
      arrivalDate: "Tue,  1 Dec 2026 06:40:11 +0000 (UTC)",
      originalEnvelopeId: undefined,
      recipients: [
        {
          finalRecipient: "nobody@example.com",
          originalRecipient: "Nobody@Example.com",
          action: "failed",
          status: "5.1.1",
          diagnosticCode: "550 5.1.1 <nobody@example.com>: Recipient address rejected: User unknown in virtual mailbox table",
          remoteMta: "mx1.example.com",
        },
      ],
    });
    expect(deliveryEventsFromMessage(Buffer.from(fixture("dsn-postfix-user-unknown.eml")))).toEqual([
      { type: "hard-bounce", address: "nobody@example.com", status: "5.1.1", detail: expect.stringContaining("User unknown") as unknown, source: "dsn" },
    ]);
  });

  it("tells hard bounces from the rest: an unknown host is hard; a full mailbox, a spam block and a delay are not; a delivery is no event", () => {
    const events = deliveryEventsFromMessage(fixture("dsn-multiple-recipients.eml"));
    expect(events.map((e) => [e.address, e.type, e.status])).toEqual([
      ["gone@example.net", "hard-bounce", "5.1.2"],
      ["full@example.org", "soft-bounce", "5.2.2"],
      ["blocked@example.com", "soft-bounce", "5.7.1"],
      ["slow@example.edu", "soft-bounce", "4.4.1"],
    ]);
    expect(parseDeliveryStatus(fixture("dsn-multiple-recipients.eml"))?.originalEnvelopeId).toBe("campaign-q4-0042");
    expect(suppressionsFromEvents(events)).toEqual([
      { address: "gone@example.net", reason: "hard-bounce", detail: expect.stringContaining("5.1.2") as unknown },
    ]);
  });

  it("decodes a base64 delivery-status part", () => {
    expect(deliveryEventsFromMessage(fixture("dsn-base64-disabled.eml"))).toEqual([
      { type: "hard-bounce", address: "left-company@example.co.uk", status: "5.2.1", detail: expect.stringContaining("disabled") as unknown, source: "dsn" },
    ]);
  });

  it("reads an RFC 5965 complaint (feedback loop) as a complaint", () => {
    expect(deliveryEventsFromMessage(fixture("arf-complaint.eml"))).toEqual([
      { type: "complaint", address: "annoyed@example.com", status: "abuse", detail: "feedback report: abuse", source: "arf" },
    ]);
  });

  it("finds nothing in an ordinary message", () => {
    expect(parseDeliveryStatus(fixture("auto-reply.eml"))).toBeNull();
    expect(deliveryEventsFromMessage(fixture("auto-reply.eml"))).toEqual([]);
  });
});

describe("Amazon SES notifications through SNS", () => {
  it("reads a permanent bounce and a complaint from the SNS envelope", () => {
    expect(parseSesNotification(json("ses-bounce-sns.json"))).toEqual({
      type: "events",
      topicArn: "arn:aws:sns:eu-west-1:123456789012:ses-feedback",
      events: [{ type: "hard-bounce", address: "nobody@example.com", status: "5.1.1", detail: "smtp; 550 5.1.1 user unknown", source: "ses" }],
    });
    expect(parseSesNotification(fixture("ses-complaint-sns.json"))).toMatchObject({
      type: "events",
      events: [{ type: "complaint", address: "annoyed@example.com", status: "abuse", source: "ses" }],
    });
  });

  it("a transient bounce (raw message delivery, event publishing format) is soft", () => {
    expect(parseSesNotification(json("ses-transient-bounce-raw.json"))).toMatchObject({
      type: "events",
      events: [{ type: "soft-bounce", address: "full@example.org" }],
    });
  });

  it("hands back the subscription confirmation URL, and refuses what is not SNS or SES", () => {
    expect(parseSesNotification(json("sns-subscription-confirmation.json"))).toEqual({
      type: "subscription-confirmation",
      topicArn: "arn:aws:sns:eu-west-1:123456789012:ses-feedback",
      subscribeUrl: expect.stringMatching(/^https:\/\/sns\.eu-west-1\.amazonaws\.com\/\?Action=ConfirmSubscription/) as unknown,
    });
    expect(() => parseSesNotification({ hello: "world" })).toThrow(/not an SNS message \(no TopicArn\) nor an SES notification/);
    expect(() => parseSesNotification({ Type: "Notification", TopicArn: "arn:x", Message: "{oops" })).toThrow(/Message is not JSON/);
  });

  it("verifies an SNS signature against the certificate's key, and refuses a changed message", () => {
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const envelope = json("ses-bounce-sns.json") as Record<string, string> & { Message: string };
    const signed = ["Message", "MessageId", "Timestamp", "TopicArn", "Type"].map((key) => `${key}\n${envelope[key]}\n`).join("");
    for (const [version, algorithm] of [
      ["1", "RSA-SHA1"],
      ["2", "RSA-SHA256"],
    ] as const) {
      const message = { ...envelope, SignatureVersion: version, Signature: createSign(algorithm).update(signed).sign(privateKey, "base64") };
      const pem = publicKey.export({ type: "spki", format: "pem" }).toString();
      expect(verifySnsSignature(message, pem)).toBe(true);
      expect(verifySnsSignature({ ...message, Message: message.Message.replace("nobody@", "somebody@") }, pem)).toBe(false);
    }
    expect(verifySnsSignature(envelope, "not a key")).toBe(false);
    expect(isSnsCertificateUrl(envelope.SigningCertURL)).toBe(true);
    expect(isSnsCertificateUrl("https://sns.eu-west-1.amazonaws.com.evil.example/x.pem")).toBe(false);
    expect(isSnsCertificateUrl("http://sns.eu-west-1.amazonaws.com/x.pem")).toBe(false);
  });
});

describe.each(BACKENDS)("feeding the suppression list on $name", (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await backend.create();
    for (const statement of suppressionTableSql(db.dialect)) await db.query(statement, []);
  });
  afterAll(() => db.close());

  it("hard bounces and complaints go on the list; soft bounces do not", async () => {
    const list = createSqlSuppressionList({ query: db.query, dialect: db.dialect });
    const events = [
      ...deliveryEventsFromMessage(fixture("dsn-multiple-recipients.eml")),
      ...deliveryEventsFromMessage(fixture("arf-complaint.eml")),
      ...(parseSesNotification(json("ses-bounce-sns.json")) as { events: DeliveryEvent[] }).events,
      ...(parseSesNotification(json("ses-transient-bounce-raw.json")) as { events: DeliveryEvent[] }).events,
    ];
    const added = await recordDeliveryEvents(list, events);
    expect(added.map((a) => a.address)).toEqual(["gone@example.net", "annoyed@example.com", "nobody@example.com"]);
    expect((await list.list()).map((e) => [e.address, e.reason])).toEqual([
      ["annoyed@example.com", "complaint"],
      ["gone@example.net", "hard-bounce"],
      ["nobody@example.com", "hard-bounce"],
    ]);
    expect(await list.isSuppressed(["full@example.org", "slow@example.edu", "blocked@example.com"])).toEqual([]);
  });
});
