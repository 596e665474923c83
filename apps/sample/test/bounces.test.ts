import { createSign, generateKeyPairSync } from "node:crypto";
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { ConfigError, loadConfig } from "../src/config.js";
import type { SnsClient } from "../src/routes/bounces.js";
import { suppressionList } from "../src/suppression.js";
import { backendNames, createEnv, type Env } from "./support.js";

const names = await backendNames();
const TOKEN = "bounce-token-0123456789abcdef0123456789";
const TOPIC = "arn:aws:sns:eu-west-1:123456789012:ses-feedback";
const fixture = (name: string) => readFile(new URL(`./fixtures/${name}`, import.meta.url));

// SNS's key, played by the test: the route fetches the certificate through the SnsClient seam.
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const PEM = publicKey.export({ type: "spki", format: "pem" }).toString();

function signed(envelope: Record<string, string>): Record<string, string> {
  const keys =
    envelope.Type === "Notification"
      ? ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
      : ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"];
  const text = keys
    .filter((key) => typeof envelope[key] === "string")
    .map((key) => `${key}\n${envelope[key]}\n`)
    .join("");
  return { ...envelope, SignatureVersion: "2", Signature: createSign("RSA-SHA256").update(text).sign(privateKey, "base64") };
}

describe("BOUNCE_TOKEN and SES_TOPIC_ARN", () => {
  it("are checked at start-up", () => {
    expect(() => loadConfig({ BOUNCE_TOKEN: "short" })).toThrow(ConfigError);
    expect(() => loadConfig({ SES_TOPIC_ARN: "ses-feedback" })).toThrow(/SES_TOPIC_ARN must be an SNS topic ARN/);
    expect(loadConfig({ BOUNCE_TOKEN: TOKEN, SES_TOPIC_ARN: TOPIC })).toMatchObject({ bounceToken: TOKEN, sesTopicArn: TOPIC });
  });
});

describe.each(names)("bounces and complaints in (%s)", (name) => {
  let env: Env;
  let url: string;
  let close: () => Promise<void>;
  const certificatesAsked: string[] = [];
  const confirmed: string[] = [];
  const sns: SnsClient = {
    certificate: async (certificateUrl) => (certificatesAsked.push(certificateUrl), PEM),
    confirm: async (subscribeUrl) => void confirmed.push(subscribeUrl),
  };

  beforeAll(async () => {
    env = await createEnv(name, { bounceToken: TOKEN, sesTopicArn: TOPIC });
    const { app } = await buildApp(env.config, { db: env.db, logger: false, sns });
    await app.listen({ port: 0, host: "127.0.0.1" });
    url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    close = () => app.close();
  });
  afterAll(async () => {
    await close?.();
    await env?.close();
  });

  const listed = async () => (await suppressionList(env.db).list()).map((e) => ({ address: e.address, reason: e.reason }));
  const postMessage = (body: Buffer, token = TOKEN) =>
    fetch(`${url}/bounces`, { method: "POST", headers: { "content-type": "message/rfc822", authorization: `Bearer ${token}` }, body });
  const postSes = (envelope: unknown) =>
    fetch(`${url}/webhooks/ses`, { method: "POST", headers: { "content-type": "text/plain; charset=UTF-8" }, body: JSON.stringify(envelope) });

  it("POST /bounces: a Postfix DSN for a hard bounce and an ARF complaint put their addresses on the list; an auto-reply adds nothing", async () => {
    const wrong = await postMessage(await fixture("dsn-postfix-user-unknown.eml"), "not-the-token");
    expect(wrong.status).toBe(401);
    expect(await listed()).toEqual([]);

    const bounce = await postMessage(await fixture("dsn-postfix-user-unknown.eml"));
    expect(bounce.status).toBe(200);
    expect(await bounce.json()).toEqual({
      events: [{ type: "hard-bounce", address: "nobody@example.com", status: "5.1.1" }],
      suppressed: [{ address: "nobody@example.com", reason: "hard-bounce" }],
    });

    const complaint = await postMessage(await fixture("arf-complaint.eml"));
    expect(complaint.status).toBe(200);
    expect(((await complaint.json()) as { suppressed: unknown }).suppressed).toEqual([{ address: "annoyed@example.com", reason: "complaint" }]);

    const reply = await postMessage(await fixture("auto-reply.eml"));
    expect(await reply.json()).toEqual({ events: [], suppressed: [] });

    expect(await suppressionList(env.db).isSuppressed(["Nobody@Example.com", "annoyed@example.com", "alice@example.com"])).toEqual([
      { address: "Nobody@Example.com", reason: "hard-bounce" },
      { address: "annoyed@example.com", reason: "complaint" },
    ]);
  });

  it("POST /webhooks/ses: a signed SES bounce is listed; a forged, altered or foreign one is refused and adds nothing", async () => {
    const envelope = JSON.parse((await fixture("ses-bounce-sns.json")).toString("utf8")) as Record<string, string>;
    const before = await listed();
    const altered = { ...signed(envelope), Message: envelope.Message!.replace("nobody@example.com", "victim@example.com") };
    expect((await postSes(altered)).status).toBe(403);
    expect((await postSes(signed({ ...envelope, TopicArn: "arn:aws:sns:eu-west-1:123456789012:someone-else" }))).status).toBe(403);
    expect((await postSes(signed({ ...envelope, SigningCertURL: "https://sns.eu-west-1.amazonaws.com.evil.example/c.pem" }))).status).toBe(403);
    expect(await listed()).toEqual(before);

    // A fresh address, so the row can only come from this notification.
    const notification = signed({ ...envelope, Message: envelope.Message!.replaceAll("nobody@example.com", "gone@example.net") });
    const response = await postSes(notification);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      events: [{ type: "hard-bounce", address: "gone@example.net", status: "5.1.1" }],
      suppressed: [{ address: "gone@example.net", reason: "hard-bounce" }],
    });
    expect(await suppressionList(env.db).isSuppressed(["gone@example.net"])).toEqual([{ address: "gone@example.net", reason: "hard-bounce" }]);
    expect(certificatesAsked).toContain(envelope.SigningCertURL);
  });

  it("POST /webhooks/ses: a signed subscription confirmation is confirmed once, an unsigned one is not", async () => {
    const envelope = JSON.parse((await fixture("sns-subscription-confirmation.json")).toString("utf8")) as Record<string, string>;
    expect((await postSes(envelope)).status).toBe(403);
    expect(confirmed).toEqual([]);
    const response = await postSes(signed(envelope));
    expect(response.status).toBe(200);
    expect(confirmed).toEqual([envelope.SubscribeURL]);
  });
});
