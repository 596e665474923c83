import { describe, expect, it } from "vitest";
import { isMailPayload, messageToPayload, payloadToMessage, type MailMessage, type MailPayload } from "../src/index.js";

const binary = Buffer.from([0, 1, 2, 127, 128, 254, 255]);

const message: MailMessage = {
  from: '"Zoë Müller" <zoe@example.org>',
  to: ["alice@example.com", "Bob <bob@example.net>", { name: "Ça Va", address: "cava@example.fr" }],
  cc: "carol@example.com, Dave <dave@example.com>",
  bcc: { address: "archive@example.org" },
  replyTo: "support@example.org",
  subject: "Résumé — 3 pièces jointes",
  text: "Grüße\n",
  html: Buffer.from("<p>Grüße</p>"),
  headers: { "X-Campaign": "q3", "X-Tag": ["a", "b"] },
  attachments: [
    { filename: "bytes.bin", contentType: "application/octet-stream", content: binary },
    { filename: "note.txt", content: "plain text, ünïcödé" },
    { filename: "hex.bin", content: "cafebabe", encoding: "hex" },
    { filename: "logo.png", cid: "logo@forge", contentDisposition: "inline", content: Buffer.from("png") },
    { filename: "big.pdf", path: "/var/files/big.pdf" },
    { filename: "remote.csv", href: "https://files.example.org/remote.csv" },
  ],
  date: new Date("2025-06-30T22:15:00.123Z"),
};

function throughJson<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

describe("messageToPayload", () => {
  it("produces plain JSON: addresses as { name, address }, bytes as { base64 }, dates as ISO strings", () => {
    const payload = messageToPayload(message);

    expect(throughJson(payload)).toEqual(payload);
    expect(payload).toMatchObject({
      v: 1,
      from: { name: "Zoë Müller", address: "zoe@example.org" },
      to: [
        { name: "", address: "alice@example.com" },
        { name: "Bob", address: "bob@example.net" },
        { name: "Ça Va", address: "cava@example.fr" },
      ],
      cc: [
        { name: "", address: "carol@example.com" },
        { name: "Dave", address: "dave@example.com" },
      ],
      bcc: [{ name: "", address: "archive@example.org" }],
      replyTo: [{ name: "", address: "support@example.org" }],
      html: { base64: Buffer.from("<p>Grüße</p>").toString("base64") },
      headers: [
        { key: "X-Campaign", value: "q3" },
        { key: "X-Tag", value: "a" },
        { key: "X-Tag", value: "b" },
      ],
      date: "2025-06-30T22:15:00.123Z",
    });
    expect(payload.attachments?.[0]?.content).toEqual({ base64: binary.toString("base64") });
    expect(payload.attachments?.[4]).toEqual({ filename: "big.pdf", path: "/var/files/big.pdf" });
  });

  it("reads a date given as a string and stores it as ISO", () => {
    const payload = messageToPayload({ to: "a@example.com", date: "Tue, 01 Jul 2025 10:00:00 +0200" });
    expect(payload.date).toBe("2025-07-01T08:00:00.000Z");
  });

  it("flattens address groups and keeps their members in order", () => {
    const payload = messageToPayload({ to: "Team: alice@example.com, bob@example.net;, carol@example.com" });
    expect(payload.to?.map((entry) => entry.address)).toEqual(["alice@example.com", "bob@example.net", "carol@example.com"]);
  });

  it("accepts the payload it produced (idempotent)", () => {
    const payload = messageToPayload(message);
    expect(messageToPayload(payloadToMessage(payload))).toEqual(payload);
  });
});

describe("round trip through JSON", () => {
  it("loses nothing: bytes, dates, non-ASCII names, several recipients, headers, references", () => {
    const back = payloadToMessage(throughJson(messageToPayload(message)));

    expect(back.from).toEqual({ name: "Zoë Müller", address: "zoe@example.org" });
    expect(back.to).toEqual([
      { name: "", address: "alice@example.com" },
      { name: "Bob", address: "bob@example.net" },
      { name: "Ça Va", address: "cava@example.fr" },
    ]);
    expect(back.cc).toHaveLength(2);
    expect(back.bcc).toEqual([{ name: "", address: "archive@example.org" }]);
    expect(back.replyTo).toEqual([{ name: "", address: "support@example.org" }]);
    expect(back.subject).toBe("Résumé — 3 pièces jointes");
    expect(back.text).toBe("Grüße\n");
    expect(back.html).toEqual(Buffer.from("<p>Grüße</p>"));
    expect(back.date).toEqual(new Date("2025-06-30T22:15:00.123Z"));
    expect(back.headers).toEqual([
      { key: "X-Campaign", value: "q3" },
      { key: "X-Tag", value: "a" },
      { key: "X-Tag", value: "b" },
    ]);
    expect(back.attachments).toEqual(message.attachments);
    expect(Buffer.isBuffer(back.attachments?.[0]?.content)).toBe(true);
  });

  it("survives a second round trip unchanged", () => {
    const once = throughJson(messageToPayload(message));
    const twice = throughJson(messageToPayload(payloadToMessage(once)));
    expect(twice).toEqual(once);
  });

  it("keeps empty and binary-looking content exact", () => {
    const empty = Buffer.alloc(0);
    const back = payloadToMessage(throughJson(messageToPayload({ to: "a@example.com", attachments: [{ filename: "empty", content: empty }] })));
    expect(back.attachments?.[0]?.content).toEqual(empty);
  });
});

describe("payloadToMessage", () => {
  it("validates what it is given (a stored payload may have been edited)", () => {
    const edited = { v: 1, to: [{ name: "", address: "bob@" }] } as MailPayload;
    expect(() => payloadToMessage(edited)).toThrow("to[0]: 'bob@' is not an email address");
  });
});

describe("isMailPayload", () => {
  it("recognises payloads and rejects everything else", () => {
    expect(isMailPayload(throughJson(messageToPayload(message)))).toBe(true);
    expect(isMailPayload({ v: 1, to: [{ name: "", address: "a@example.com" }] })).toBe(true);
    expect(isMailPayload(null)).toBe(false);
    expect(isMailPayload("forge.mail.send")).toBe(false);
    expect(isMailPayload({ to: [{ name: "", address: "a@example.com" }] })).toBe(false);
    expect(isMailPayload({ v: 2, to: [{ name: "", address: "a@example.com" }] })).toBe(false);
    expect(isMailPayload({ v: 1, to: ["a@example.com"] })).toBe(false);
    expect(isMailPayload({ v: 1, to: [{ name: "", address: "a@example.com" }], text: { base64: "not base64!" } })).toBe(false);
  });
});
