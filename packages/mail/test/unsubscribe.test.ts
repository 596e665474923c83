import { generateKeyPairSync } from "node:crypto";
import { createRequire } from "node:module";
import { afterEach, describe, expect, it } from "vitest";
import {
  createMailHandler,
  createUnsubscribeToken,
  DKIM_HEADER_FIELD_NAMES,
  listUnsubscribeHeaders,
  messageToPayload,
  verifyUnsubscribeToken,
} from "../src/index.js";
import { decodeWords, headerValues, startSmtpServer, type TestSmtpServer } from "./helpers/smtp.js";

const SECRET = "k3f9b1d2c7e84a6f0b5d9c2e1a7f3b8d";
const servers: TestSmtpServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function smtp(): Promise<TestSmtpServer> {
  const server = await startSmtpServer();
  servers.push(server);
  return server;
}

describe("unsubscribe tokens", () => {
  const now = new Date("2026-12-01T08:00:00Z");

  it("round-trips the address (in lower case) and the list, until it expires", () => {
    const token = createUnsubscribeToken("Alice@Example.com", { secret: SECRET, list: "acme/newsletter", ttlSeconds: 3600, now });
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(verifyUnsubscribeToken(token, { secret: SECRET, now: new Date(now.getTime() + 3599_000) })).toEqual({
      ok: true,
      address: "alice@example.com",
      list: "acme/newsletter",
      expiresAt: new Date(now.getTime() + 3600_000),
    });
    expect(verifyUnsubscribeToken(token, { secret: SECRET, now: new Date(now.getTime() + 3600_000) })).toEqual({ ok: false, reason: "expired" });
  });

  it("refuses a tampered token, another secret's token, and garbage", () => {
    const token = createUnsubscribeToken("alice@example.com", { secret: SECRET, now });
    const [body, signature] = token.split(".") as [string, string];
    const forged = Buffer.from(JSON.stringify({ a: "bob@example.com", e: 4102444800 })).toString("base64url");
    expect(verifyUnsubscribeToken(`${forged}.${signature}`, { secret: SECRET, now })).toEqual({ ok: false, reason: "bad-signature" });
    const flipped = signature.slice(0, -2) + (signature.endsWith("A") ? "B" : "A") + signature.slice(-1);
    expect(verifyUnsubscribeToken(`${body}.${flipped}`, { secret: SECRET, now })).toEqual({ ok: false, reason: "bad-signature" });
    expect(verifyUnsubscribeToken(token, { secret: `${SECRET}x`, now })).toEqual({ ok: false, reason: "bad-signature" });
    for (const junk of ["", "abc", "a.b.c", 42, undefined, "x".repeat(5000)])
      expect(verifyUnsubscribeToken(junk, { secret: SECRET, now })).toEqual({ ok: false, reason: "malformed" });
  });

  it("refuses a short secret, a bad address and a bad lifetime", () => {
    expect(() => createUnsubscribeToken("a@example.com", { secret: "short" })).toThrow(/secret must be a string or bytes of at least 32/);
    expect(() => verifyUnsubscribeToken("x.y", { secret: "" })).toThrow(/at least 32/);
    expect(() => createUnsubscribeToken(" ", { secret: SECRET })).toThrow(/address must be a non-empty/);
    expect(() => createUnsubscribeToken("a@example.com", { secret: SECRET, ttlSeconds: 0 })).toThrow(/ttlSeconds must be/);
  });

  it("refuses something that is not an email address, saying to pass the recipient's bare address", () => {
    for (const notAnAddress of ["not an address", "alice", "alice@", "@example.com", "Alice <alice@example.com>", "a@example.com, b@example.com"]) {
      expect(() => createUnsubscribeToken(notAnAddress, { secret: SECRET })).toThrow(TypeError);
      expect(() => createUnsubscribeToken(notAnAddress, { secret: SECRET })).toThrow(
        `createUnsubscribeToken: address must be the recipient's email address alone, such as alice@example.com (no display name, one address); got ${JSON.stringify(notAnAddress)}`,
      );
    }
    expect(() => createUnsubscribeToken(42 as unknown as string, { secret: SECRET })).toThrow(/address must be a non-empty/);
  });
});

describe("RFC 8058 headers", () => {
  it("are built for an https URL only", () => {
    expect(listUnsubscribeHeaders("https://shop.example.org/unsubscribe?token=abc", { mailto: "unsubscribe@shop.example.org" })).toEqual({
      "List-Unsubscribe": "<https://shop.example.org/unsubscribe?token=abc>, <mailto:unsubscribe@shop.example.org?subject=unsubscribe>",
      "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    });
    expect(() => listUnsubscribeHeaders("http://shop.example.org/u")).toThrow(/must use https/);
    expect(() => listUnsubscribeHeaders("/unsubscribe")).toThrow(/absolute https/);
  });

  it("reach the recipient on the message the handler sends", async () => {
    const server = await smtp();
    const token = createUnsubscribeToken("alice@example.com", { secret: SECRET });
    const url = `https://shop.example.org/unsubscribe?token=${token}`;
    await createMailHandler({ transport: server.url })(
      messageToPayload({ from: "news@shop.example.org", to: "alice@example.com", subject: "News", text: "Hi", headers: listUnsubscribeHeaders(url) }),
    );
    const raw = server.delivered[0]!.raw;
    expect(headerValues(raw, "List-Unsubscribe").map(decodeWords)).toEqual([`<${url}>`]);
    expect(headerValues(raw, "List-Unsubscribe-Post")).toEqual(["List-Unsubscribe=One-Click"]);
  });
});

type DkimVerify = (
  message: string,
  options: { resolver: (name: string, type: string) => Promise<string[][]> },
) => Promise<{ results: Array<{ status: { result: string }; signingDomain: string; signingHeaders: { keys: string } }> }>;
const { dkimVerify } = createRequire(import.meta.url)("mailauth/lib/dkim/verify.js") as { dkimVerify: DkimVerify };

describe("DKIM, configured on the transport", () => {
  it("signs every message, List-Unsubscribe and List-Unsubscribe-Post included; mailauth verifies it against the published key", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const published = `v=DKIM1; k=rsa; p=${publicKey.export({ type: "spki", format: "der" }).toString("base64")}`;
    const lookups: string[] = [];
    const resolver = async (name: string, type: string): Promise<string[][]> => {
      lookups.push(`${type} ${name}`);
      if (type === "TXT" && name === "mail2026._domainkey.shop.example.org") return [[published.slice(0, 200), published.slice(200)]];
      throw Object.assign(new Error(`no ${type} record for ${name}`), { code: "ENOTFOUND" });
    };

    const server = await smtp();
    const send = createMailHandler({
      transport: {
        host: "127.0.0.1",
        port: server.port,
        secure: false,
        ignoreTLS: true,
        dkim: {
          domainName: "shop.example.org",
          keySelector: "mail2026",
          privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
          headerFieldNames: DKIM_HEADER_FIELD_NAMES,
        },
      },
    });
    await send(
      messageToPayload({
        from: "Shop <news@shop.example.org>",
        to: "alice@example.com",
        subject: "Décembre",
        text: "Bonjour,\n. a line starting with a dot\n",
        html: "<p>Bonjour</p>",
        headers: listUnsubscribeHeaders("https://shop.example.org/unsubscribe?token=abc"),
      }),
    );
    const raw = server.delivered[0]!.raw;

    const verdict = await dkimVerify(raw, { resolver });
    expect(verdict.results).toHaveLength(1);
    const [result] = verdict.results;
    expect(result!.status.result).toBe("pass");
    expect(result!.signingDomain).toBe("shop.example.org");
    expect(result!.signingHeaders.keys.toLowerCase().split(": ")).toEqual(
      expect.arrayContaining(["list-unsubscribe", "list-unsubscribe-post", "from", "subject"]),
    );
    expect(lookups).toContain("TXT mail2026._domainkey.shop.example.org");

    // The same bytes with the subject changed no longer verify.
    const altered = raw.replace(/^Subject: .*$/m, "Subject: Changed");
    expect((await dkimVerify(altered, { resolver })).results[0]!.status.result).toBe("fail");
  });
});
