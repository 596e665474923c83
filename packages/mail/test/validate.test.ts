import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_ATTACHMENT_BYTES, MailPayloadError, messageToPayload, type MailMessage } from "../src/index.js";

function failure(run: () => unknown): MailPayloadError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(MailPayloadError);
    return error as MailPayloadError;
  }
  throw new Error("expected a MailPayloadError");
}

const to = "alice@example.com";

const cases: Array<[string, MailMessage, string, string]> = [
  ["no recipient at all", { subject: "hi" }, "to", "to: no recipient: give at least one address in to, cc or bcc"],
  ["empty recipient lists", { to: [], cc: "", bcc: [] }, "to", "to: no recipient: give at least one address in to, cc or bcc"],
  ["a truncated address", { to: ["alice@example.com", "bob@"] }, "to[1]", "to[1]: 'bob@' is not an email address"],
  ["a bare word", { to: "bob" }, "to[0]", "to[0]: 'bob' is not an email address"],
  ["two @ in a list given as one string", { to: "alice@example.com, a@b@c" }, "to[1]", "to[1]: 'a@b@c' is not an email address"],
  ["a bad cc", { to, cc: { address: "carol at example.com" } }, "cc[0]", "cc[0]: 'carol at example.com' is not an email address"],
  ["a bad bcc", { to, bcc: ["x@example.com", "@example.com"] }, "bcc[1]", "bcc[1]: '@example.com' is not an email address"],
  ["a bad reply-to", { to, replyTo: "nobody@" }, "replyTo[0]", "replyTo[0]: 'nobody@' is not an email address"],
  ["a bad sender", { to, from: "noreply@" }, "from", "from: 'noreply@' is not an email address"],
  ["two senders", { to, from: "a@example.com, b@example.com" }, "from", "from: must be exactly one address (got 2)"],
  [
    "CR/LF in the subject",
    { to, subject: "Hi\r\nBcc: evil@attacker.test" },
    "subject",
    "subject: contains a line break (CR or LF), which could inject a header",
  ],
  ["LF alone in the subject", { to, subject: "Hi\nX-Evil: 1" }, "subject", "subject: contains a line break (CR or LF), which could inject a header"],
  [
    "CR/LF in a header value",
    { to, headers: { "X-Tag": "a\r\nBcc: evil@attacker.test" } },
    "headers.X-Tag",
    "headers.X-Tag: contains a line break (CR or LF), which could inject a header",
  ],
  ["a header name with a colon", { to, headers: { "X-Tag: 1": "a" } }, "headers[0].key", "headers[0].key: 'X-Tag: 1' is not a valid header name"],
  [
    "CR/LF in a display name",
    { to: { name: "Alice\r\nBcc: evil@attacker.test", address: to } },
    "to[0].name",
    "to[0].name: contains a line break (CR or LF), which could inject a header",
  ],
  [
    "CR/LF in an address string",
    { to: [to, "bob@example.com\nBcc: evil@attacker.test"] },
    "to[1]",
    "to[1]: contains a line break (CR or LF), which could inject a header",
  ],
  [
    "CR/LF in an attachment content type",
    { to, attachments: [{ content: "x", contentType: "text/plain\r\nBcc: e@x.test" }] },
    "attachments[0].contentType",
    "attachments[0].contentType: contains a line break (CR or LF), which could inject a header",
  ],
  [
    "an attachment with no content",
    { to, attachments: [{ filename: "a.txt" }] },
    "attachments[0]",
    "attachments[0]: needs exactly one of content, path or href (got none)",
  ],
  [
    "an attachment with two sources",
    { to, attachments: [{ content: "x", path: "/tmp/x" }] },
    "attachments[0]",
    "attachments[0]: needs exactly one of content, path or href (got content, path)",
  ],
  [
    "an unknown encoding",
    { to, attachments: [{ content: "x", encoding: "rot13" }] },
    "attachments[0].encoding",
    "attachments[0].encoding: 'rot13' is not a known encoding",
  ],
  ["an invalid date", { to, date: new Date("nope") }, "date", "date: is an invalid Date"],
  ["a date string that is not a date", { to, date: "yesterday" }, "date", "date: 'yesterday' is not a date"],
];

describe("messageToPayload refuses invalid input with a MailPayloadError naming the field", () => {
  it.each(cases)("%s", (_name, message, field, text) => {
    const error = failure(() => messageToPayload(message));
    expect(error.field).toBe(field);
    expect(error.message).toBe(text);
    expect(Object.hasOwn(error, "retryable")).toBe(true);
    expect(error.retryable).toBe(false);
  });
});

describe("attachment size", () => {
  it("defaults to a 5 MiB limit per inline attachment", () => {
    expect(DEFAULT_MAX_ATTACHMENT_BYTES).toBe(5 * 1024 * 1024);
    expect(() => messageToPayload({ to, attachments: [{ content: Buffer.alloc(DEFAULT_MAX_ATTACHMENT_BYTES) }] })).not.toThrow();

    const error = failure(() => messageToPayload({ to, attachments: [{ filename: "scan.pdf", content: Buffer.alloc(DEFAULT_MAX_ATTACHMENT_BYTES + 1) }] }));

    expect(error.field).toBe("attachments[0]");
    expect(error.message).toBe(
      "attachments[0]: 5.0 MiB ('scan.pdf') is over the 5.0 MiB limit for inline attachments; " +
        "attach it by reference (path or href) or raise maxAttachmentBytes",
    );
  });

  it("takes the configured limit, counting decoded bytes", () => {
    const options = { maxAttachmentBytes: 4 };
    expect(() => messageToPayload({ to, attachments: [{ content: "deadbeef", encoding: "hex" }] }, options)).not.toThrow();
    expect(() => messageToPayload({ to, attachments: [{ content: Buffer.alloc(4) }] }, options)).not.toThrow();

    const error = failure(() => messageToPayload({ to, attachments: [{ content: "a" }, { content: "hello" }] }, options));
    expect(error.message).toBe(
      "attachments[1]: 5 bytes is over the 4 bytes limit for inline attachments; attach it by reference (path or href) or raise maxAttachmentBytes",
    );
  });

  it("does not count attachments given by reference", () => {
    expect(() => messageToPayload({ to, attachments: [{ path: "/var/files/huge.iso" }] }, { maxAttachmentBytes: 0 })).not.toThrow();
  });
});

describe("what a job cannot store", () => {
  it("refuses stream content and points to path or href", () => {
    const stream = { pipe: () => undefined } as unknown as string;
    const error = failure(() => messageToPayload({ to, attachments: [{ content: stream }] }));
    expect(error.message).toBe("attachments[0].content: must be a string or a Buffer; a stream cannot be stored in a job (give a path or href instead)");
  });

  it("refuses fields it would otherwise drop", () => {
    const error = failure(() => messageToPayload({ to, envelope: { to: "evil@attacker.test" } } as MailMessage));
    expect(error.field).toBe("envelope");
    expect(error.message).toMatch(/^envelope: is not supported \(known fields: from, to, cc, bcc, replyTo, subject/);
  });

  it("refuses something that is not a message", () => {
    expect(failure(() => messageToPayload(null as unknown as MailMessage)).message).toBe("message: must be an object");
  });
});

describe("stored payloads are checked as strictly", () => {
  it("names an unsupported version", async () => {
    const { isMailPayload, payloadToMessage } = await import("../src/index.js");
    const future = { v: 2, to: [{ name: "", address: to }] };
    expect(isMailPayload(future)).toBe(false);
    expect(failure(() => payloadToMessage(future as never)).message).toBe("v: unsupported payload version 2 (this @forge/mail reads version 1)");
  });
});
