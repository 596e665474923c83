import { afterEach, describe, expect, it } from "vitest";
import { createMailHandler, isMailPayload, MailPayloadError, messageToPayload, payloadToMessage, previewMail, type MailPayload } from "../src/index.js";
import { startSmtpServer, type TestSmtpServer } from "./helpers/smtp.js";

const servers: TestSmtpServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function smtp(): Promise<TestSmtpServer> {
  const server = await startSmtpServer();
  servers.push(server);
  return server;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  let value: unknown;
  try {
    value = await promise;
  } catch (error) {
    return error;
  }
  throw new Error(`expected the promise to reject; it resolved with ${JSON.stringify(value)}`);
}

const to = "alice@example.com";
const bounced = "bounced@example.com";

// Each address header, in the letter cases people write, with the field that carries it.
const headerFields: Array<[string, string]> = [
  ["To", "to"],
  ["Cc", "cc"],
  ["Bcc", "bcc"],
  ["From", "from"],
  ["Reply-To", "replyTo"],
  ["Sender", "from"],
  ["bcc", "bcc"],
  ["BCC", "bcc"],
  ["cC", "cc"],
  ["reply-to", "replyTo"],
  ["SENDER", "from"],
];
const resentHeaders = ["Resent-To", "Resent-Cc", "Resent-Bcc", "Resent-From", "Resent-Sender", "resent-bcc"];

describe("address headers in `headers`", () => {
  it.each(headerFields)("messageToPayload refuses %s and names the %s field to use instead", (name, field) => {
    const asRecord = (): unknown => messageToPayload({ to, headers: { "X-Campaign": "q3", [name]: bounced } });
    const asList = (): unknown =>
      messageToPayload({
        to,
        headers: [
          { key: "X-Campaign", value: "q3" },
          { key: name, value: bounced },
        ],
      });
    for (const attempt of [asRecord, asList]) {
      expect(attempt).toThrow(MailPayloadError);
      expect(attempt).toThrow(expect.objectContaining({ field: "headers[1].key", retryable: false }));
      expect(attempt).toThrow(`headers[1].key: '${name}' is an address header: give the address in the ${field} field instead`);
    }
  });

  it.each(resentHeaders)("messageToPayload refuses %s (resent fields are not supported)", (name) => {
    const attempt = (): unknown => messageToPayload({ to, headers: { [name]: bounced } });
    expect(attempt).toThrow(expect.objectContaining({ name: "MailPayloadError", field: "headers[0].key", retryable: false }));
    expect(attempt).toThrow(`headers[0].key: '${name}' is an address header: resent fields are not supported; give the recipients in the to, cc or bcc fields`);
  });

  it("refuses the Bcc and Cc of the issue's example, at the first one", () => {
    expect(() => messageToPayload({ to, headers: { Bcc: bounced, Cc: "x@example.com" } })).toThrow(
      "headers[0].key: 'Bcc' is an address header: give the address in the bcc field instead",
    );
  });

  it("keeps headers whose names only contain an address header's name", () => {
    const headers = { "In-Reply-To": "<1@example.org>", "X-Original-To": to, "Delivered-To": to, "X-Bcc": "no", "List-Unsubscribe": "<https://x.example/u>" };
    const payload = messageToPayload({ to, headers });
    expect(payload.headers?.map((header) => header.key)).toEqual(Object.keys(headers));
  });

  it("payloadToMessage, isMailPayload, previewMail and a handler's defaults refuse a stored payload that carries one", async () => {
    const stored = { v: 1, to: [{ name: "", address: to }], headers: [{ key: "bcc", value: bounced }] } as MailPayload;
    expect(() => payloadToMessage(stored)).toThrow("headers[0].key: 'bcc' is an address header: give the address in the bcc field instead");
    expect(isMailPayload(stored)).toBe(false);
    await expect(previewMail(stored)).rejects.toThrow(MailPayloadError);
    expect(() => createMailHandler({ transport: "smtp://127.0.0.1:1", defaults: { headers: { Cc: bounced } } })).toThrow(
      "headers[0].key: 'Cc' is an address header: give the address in the cc field instead",
    );
  });
});

describe("a payload written to the queue by hand with address headers", () => {
  it("fails the job (not retryable) and reaches no SMTP server: no connection, no RCPT TO, nothing delivered", async () => {
    const server = await smtp();
    const handler = createMailHandler({ transport: server.url });
    const payload = {
      v: 1,
      to: [{ name: "", address: to }],
      subject: "Hello",
      text: "Hi",
      headers: [
        { key: "X-Campaign", value: "q3" },
        { key: "Bcc", value: bounced },
        { key: "Cc", value: "outsider@example.net" },
      ],
    };

    const error = await rejection(handler(JSON.parse(JSON.stringify(payload)) as unknown));

    expect(error).toBeInstanceOf(MailPayloadError);
    expect(error).toMatchObject({ field: "headers[1].key", retryable: false });
    expect((error as Error).message).toBe(
      "headers[1].key: 'Bcc' is an address header: give the address in the bcc field instead " +
        "(addresses in headers would escape the address checks and the suppression list)",
    );
    expect(server.connections).toBe(0);
    expect(server.rcptSeen).toEqual([]);
    expect(server.delivered).toEqual([]);

    // The same message with the address in the field is sent, to both recipients.
    const { headers: _headers, ...rest } = payload;
    await handler({ ...rest, bcc: [{ name: "", address: bounced }] });
    expect(server.delivered.map((mail) => mail.rcptTo)).toEqual([[to, bounced]]);
  });
});
