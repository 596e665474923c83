import { mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import nodemailer from "nodemailer";
import { afterEach, describe, expect, it } from "vitest";
import { createMailHandler, MailPayloadError, MailSendError, messageToPayload, type MailMessage, type MailPayload } from "../src/index.js";
import {
  attachmentBytes,
  closedPort,
  decodeWords,
  headerBlock,
  headerValues,
  silentServer,
  startSmtpServer,
  type SmtpBehaviour,
  type TestSmtpServer,
} from "./helpers/smtp.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function smtp(behaviour?: SmtpBehaviour): Promise<TestSmtpServer> {
  const server = await startSmtpServer(behaviour);
  cleanups.push(() => server.close());
  return server;
}

/** What a worker reads back from the jobs table. */
function stored(payload: MailPayload): unknown {
  return JSON.parse(JSON.stringify(payload)) as unknown;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the promise to reject");
}

function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  return Promise.race([promise, new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms))]);
}

async function sendError(promise: Promise<unknown>): Promise<MailSendError> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(MailSendError);
  return error as MailSendError;
}

const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

const report: MailMessage = {
  from: '"Zoë Müller" <zoe@example.org>',
  to: ["alice@example.com", "Bob <bob@example.net>"],
  bcc: "archive@example.org",
  subject: "Quarterly report",
  text: "Hello Alice,\nthe report is attached.",
  html: "<p>Hello <b>Alice</b></p>",
  headers: { "X-Campaign": "q3-2025" },
  attachments: [{ filename: "report.bin", contentType: "application/octet-stream", content: binary }],
  date: new Date("2025-01-02T03:04:05Z"),
};

describe("delivery to a real SMTP server", () => {
  it("delivers the headers, both bodies and the attachment to every recipient, once", async () => {
    const server = await smtp();
    const handler = createMailHandler({ transport: server.url });

    const result = await handler(stored(messageToPayload(report)));

    expect(result.accepted).toEqual(["alice@example.com", "bob@example.net", "archive@example.org"]);
    expect(result.rejected).toEqual([]);
    expect(result.response).toMatch(/^250/);
    expect(JSON.parse(JSON.stringify(result))).toEqual(result);

    expect(server.delivered).toHaveLength(1);
    const [mail] = server.delivered;
    expect(mail?.mailFrom).toBe("zoe@example.org");
    expect(mail?.rcptTo).toEqual(["alice@example.com", "bob@example.net", "archive@example.org"]);
    const raw = mail?.raw ?? "";
    expect(decodeWords(headerValues(raw, "From")[0] ?? "")).toBe("Zoë Müller <zoe@example.org>");
    expect(headerValues(raw, "To")).toEqual(["alice@example.com, Bob <bob@example.net>"]);
    expect(headerValues(raw, "Bcc")).toEqual([]);
    expect(headerValues(raw, "Subject")).toEqual(["Quarterly report"]);
    expect(headerValues(raw, "X-Campaign")).toEqual(["q3-2025"]);
    expect(headerValues(raw, "Date")).toEqual(["Thu, 02 Jan 2025 03:04:05 +0000"]);
    expect(headerValues(raw, "Message-ID")).toEqual([result.messageId]);
    expect(raw).toContain("the report is attached.");
    expect(raw).toContain("<p>Hello <b>Alice</b></p>");
    expect(attachmentBytes(raw, "report.bin")).toEqual(binary);
  });

  it("accepts transport options and a ready transporter as well as an SMTP URL", async () => {
    const server = await smtp();
    const payload = stored(messageToPayload({ to: "alice@example.com", from: "app@example.org", text: "hi" }));

    await createMailHandler({ transport: { host: "127.0.0.1", port: server.port, ignoreTLS: true } })(payload);
    const transporter = nodemailer.createTransport({ host: "127.0.0.1", port: server.port, ignoreTLS: true });
    await createMailHandler({ transport: transporter })(payload);

    expect(server.delivered.map((mail) => mail.rcptTo)).toEqual([["alice@example.com"], ["alice@example.com"]]);
  });

  it("refuses a missing transport when the handler is created, naming SMTP_URL", () => {
    expect(() => createMailHandler({ transport: undefined })).toThrow(/SMTP URL; got undefined \(is SMTP_URL set\?\)/);
    expect(() => createMailHandler({ transport: "" })).toThrow(/got an empty string/);
  });

  it("fills fields the payload lacks from the defaults, and lets the payload win", async () => {
    const server = await smtp();
    const handler = createMailHandler({
      transport: server.url,
      defaults: { from: "Forge <noreply@example.org>", headers: { "X-Source": "worker" } },
    });

    await handler(stored(messageToPayload({ to: "alice@example.com", text: "a" })));
    await handler(stored(messageToPayload({ to: "alice@example.com", from: "boss@example.org", text: "b" })));

    const [first, second] = server.delivered;
    expect(first?.mailFrom).toBe("noreply@example.org");
    expect(headerValues(first?.raw ?? "", "X-Source")).toEqual(["worker"]);
    expect(second?.mailFrom).toBe("boss@example.org");
  });

  it("refuses invalid defaults when the handler is created", () => {
    expect(() => createMailHandler({ transport: "smtp://127.0.0.1:25", defaults: { from: "nobody@" } })).toThrow("from: 'nobody@' is not an email address");
  });

  it("reads attachments given by reference (path, href) when it sends", async () => {
    const dir = await mkdtemp(join(tmpdir(), "forge-mail-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, "invoice.pdf");
    await writeFile(file, binary);
    const web = http.createServer((_request, response) => response.end("fetched over http"));
    await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise((resolve) => web.close(resolve)));
    const { port } = web.address() as AddressInfo;
    const server = await smtp();

    const payload = messageToPayload({
      to: "alice@example.com",
      attachments: [
        { filename: "invoice.pdf", path: file },
        { filename: "notes.txt", href: `http://127.0.0.1:${port}/notes` },
      ],
    });
    expect(JSON.stringify(payload)).not.toContain(binary.toString("base64"));
    await createMailHandler({ transport: server.url })(stored(payload));

    const raw = server.delivered[0]?.raw ?? "";
    expect(attachmentBytes(raw, "invoice.pdf")).toEqual(binary);
    expect(attachmentBytes(raw, "notes.txt").toString()).toBe("fetched over http");
  });

  it("refuses path and href attachments when the handler disables them, without connecting", async () => {
    const server = await smtp();
    const handler = createMailHandler({ transport: server.url, disableFileAccess: true, disableUrlAccess: true });

    const byPath = await rejection(handler(stored(messageToPayload({ to: "a@example.com", attachments: [{ path: "/etc/passwd" }] }))));
    const byHref = await rejection(handler(stored(messageToPayload({ to: "a@example.com", attachments: [{ href: "http://169.254.169.254/" }] }))));

    expect(byPath).toMatchObject({ field: "attachments[0].path", retryable: false });
    expect(byHref).toMatchObject({ field: "attachments[0].href", retryable: false });
    expect(server.connections).toBe(0);
  });
});

describe("failures a retry can fix are retryable", () => {
  it("a server that is down (connection refused)", async () => {
    const port = await closedPort();
    const error = await sendError(createMailHandler({ transport: `smtp://127.0.0.1:${port}` })(stored(messageToPayload({ to: "a@example.com" }))));

    expect(Object.hasOwn(error, "retryable")).toBe(true);
    expect(error.retryable).toBe(true);
    expect(error.code).toBe("ESOCKET");
    expect(error.message).toMatch(/ECONNREFUSED/);
  });

  it("a server that never greets (timeout)", async () => {
    const silent = await silentServer();
    cleanups.push(() => silent.close());
    const handler = createMailHandler({ transport: { host: "127.0.0.1", port: silent.port, greetingTimeout: 200 } });

    const error = await sendError(handler(stored(messageToPayload({ to: "a@example.com" }))));

    expect(error).toMatchObject({ retryable: true, code: "ETIMEDOUT" });
  });

  it("a host name that does not resolve (DNS)", async () => {
    const handler = createMailHandler({ transport: { host: "smtp.forge-mail-test.invalid", port: 25 } });

    const error = await sendError(handler(stored(messageToPayload({ to: "a@example.com" }))));

    expect(error).toMatchObject({ retryable: true, code: "EDNS" });
  });

  it("451 to RCPT TO", async () => {
    const server = await smtp({ rcptTo: () => [451, "Greylisted, try again later"] });
    const error = await sendError(createMailHandler({ transport: server.url })(stored(messageToPayload({ to: "a@example.com" }))));

    expect(error).toMatchObject({ retryable: true, code: "EENVELOPE", responseCode: 451, command: "RCPT TO" });
    expect(server.delivered).toEqual([]);
  });

  it("451 to MAIL FROM and at the end of DATA", async () => {
    const payload = stored(messageToPayload({ from: "app@example.org", to: "a@example.com" }));
    const busy = await smtp({ mailFrom: [451, "Local error, try later"] });
    const failing = await smtp({ data: [451, "Queue full"] });

    const atMail = await sendError(createMailHandler({ transport: busy.url })(payload));
    const atData = await sendError(createMailHandler({ transport: failing.url })(payload));

    expect(atMail).toMatchObject({ retryable: true, responseCode: 451, command: "MAIL FROM" });
    expect(atData).toMatchObject({ retryable: true, responseCode: 451 });
  });
});

describe("failures a retry cannot fix are final (retryable: false)", () => {
  it("550 unknown mailbox", async () => {
    const server = await smtp({ rcptTo: () => [550, "No such user here"] });
    const error = await sendError(createMailHandler({ transport: server.url })(stored(messageToPayload({ to: "ghost@example.com" }))));

    expect(Object.hasOwn(error, "retryable")).toBe(true);
    expect(error).toMatchObject({ retryable: false, code: "EENVELOPE", responseCode: 550 });
    expect(error.response).toMatch(/No such user here/);
    expect(server.delivered).toEqual([]);
  });

  it("554 at the end of DATA", async () => {
    const server = await smtp({ data: [554, "Message rejected as spam"] });
    const error = await sendError(createMailHandler({ transport: server.url })(stored(messageToPayload({ to: "a@example.com" }))));

    expect(error).toMatchObject({ retryable: false, code: "EMESSAGE", responseCode: 554 });
  });

  it("an invalid payload, before any connection", async () => {
    const server = await smtp();
    const handler = createMailHandler({ transport: server.url });

    const error = await rejection(handler({ v: 1, to: [{ name: "", address: "bob@" }] }));
    const notMail = await rejection(handler({ campaignId: 7 }));

    expect(error).toBeInstanceOf(MailPayloadError);
    expect(Object.hasOwn(error as object, "retryable")).toBe(true);
    expect(error).toMatchObject({ retryable: false, field: "to[0]", message: "to[0]: 'bob@' is not an email address" });
    expect(notMail).toMatchObject({ retryable: false, field: "v" });
    expect(server.connections).toBe(0);
  });
});

describe("a partly refused recipient list", () => {
  it("resolves with the refused recipients in the result instead of throwing", async () => {
    const server = await smtp({ rcptTo: (address) => (address.startsWith("ghost") ? [550, "No such user"] : undefined) });
    const handler = createMailHandler({ transport: server.url });

    const result = await handler(stored(messageToPayload({ to: ["alice@example.com", "ghost@example.com"], cc: "bob@example.net" })), {
      signal: new AbortController().signal,
    });

    expect(result.accepted).toEqual(["alice@example.com", "bob@example.net"]);
    expect(result.rejected).toEqual(["ghost@example.com"]);
    expect(server.delivered).toHaveLength(1);
    expect(server.delivered[0]?.rcptTo).toEqual(["alice@example.com", "bob@example.net"]);
  });
});

describe("CR/LF cannot inject a header or a recipient", () => {
  const evil = "evil@attacker.test";
  const vectors: Array<{ name: string; message: MailMessage; forged: Record<string, unknown>; field: string }> = [
    {
      name: "subject",
      message: { to: "alice@example.com", subject: `Hello\r\nBcc: ${evil}` },
      forged: { subject: `Hello\r\nBcc: ${evil}` },
      field: "subject",
    },
    {
      name: "custom header",
      message: { to: "alice@example.com", headers: { "X-Tag": `a\r\nBcc: ${evil}` } },
      forged: { headers: [{ key: "X-Tag", value: `a\r\nBcc: ${evil}` }] },
      field: "headers.X-Tag",
    },
    {
      name: "header name",
      message: { to: "alice@example.com", headers: { [`Bcc: ${evil}\r\nX-Tag`]: "a" } },
      forged: { headers: [{ key: `Bcc: ${evil}\r\nX-Tag`, value: "a" }] },
      field: "headers[0].key",
    },
    {
      name: "address string",
      message: { to: `alice@example.com\r\nBcc: ${evil}` },
      forged: { to: [{ name: "", address: `alice@example.com>\r\nRCPT TO:<${evil}` }] },
      field: "to[0]",
    },
    {
      name: "display name",
      message: { to: { name: `Alice\r\nBcc: ${evil}`, address: "alice@example.com" } },
      forged: { to: [{ name: `Alice\r\nBcc: ${evil}`, address: "alice@example.com" }] },
      field: "to[0].name",
    },
    {
      name: "attachment file name",
      message: { to: "alice@example.com", attachments: [{ filename: `a.txt\r\nBcc: ${evil}`, content: "x" }] },
      forged: { attachments: [{ filename: `a.txt\r\nBcc: ${evil}`, content: "x" }] },
      field: "attachments[0].filename",
    },
  ];

  it.each(vectors)("in the $name: refused by messageToPayload", ({ message, field }) => {
    expect(() => messageToPayload(message)).toThrow(MailPayloadError);
    expect(() => messageToPayload(message)).toThrow(expect.objectContaining({ field, retryable: false }));
  });

  it.each(vectors)("in the $name: a forged payload reaches no server", async ({ forged, field }) => {
    const server = await smtp();
    const handler = createMailHandler({ transport: server.url });
    const payload = { v: 1, to: [{ name: "", address: "alice@example.com" }], ...forged };

    const error = await rejection(handler(payload));

    expect(error).toMatchObject({ name: "MailPayloadError", field, retryable: false });
    expect(server.connections).toBe(0);
    expect(server.rcptSeen).toEqual([]);
  });

  it("the same message without the line break goes to the named recipient only", async () => {
    const server = await smtp();
    const handler = createMailHandler({ transport: server.url });

    await handler(
      stored(
        messageToPayload({
          to: { name: "Alice Bcc: evil", address: "alice@example.com" },
          subject: `Hello Bcc: ${evil}`,
          headers: { "X-Tag": `a Bcc: ${evil}` },
        }),
      ),
    );

    expect(server.rcptSeen).toEqual(["alice@example.com"]);
    expect(server.delivered[0]?.rcptTo).toEqual(["alice@example.com"]);
    expect(headerValues(server.delivered[0]?.raw ?? "", "Bcc")).toEqual([]);
    expect(headerBlock(server.delivered[0]?.raw ?? "")).not.toMatch(/^Bcc:/im);
  });
});

describe("the job's signal", () => {
  it("aborts a send in flight: retryable EABORT, connection closed, nothing delivered", async () => {
    let release!: () => void;
    const server = await smtp({ holdRcpt: new Promise<void>((resolve) => (release = resolve)) });
    cleanups.unshift(async () => release());
    const handler = createMailHandler({ transport: server.url });
    const controller = new AbortController();

    const sending = handler(stored(messageToPayload({ to: "alice@example.com", text: "hi" })), { signal: controller.signal });
    await expect.poll(() => server.rcptSeen).toEqual(["alice@example.com"]);
    const closed = server.nextClose();
    controller.abort(new Error("lease lost"));

    const error = await within(1000, sendError(sending), "the rejection");
    expect(error).toMatchObject({ retryable: true, code: "EABORT" });
    expect(error.message).toMatch(/lease lost/);
    await within(1000, closed, "closing the connection");
    release();
    expect(server.dataSeen).toEqual([]);
    expect(server.delivered).toEqual([]);
  });

  it("does not connect at all when the signal has already fired", async () => {
    const server = await smtp();
    const controller = new AbortController();
    controller.abort();

    const error = await sendError(
      createMailHandler({ transport: server.url })(stored(messageToPayload({ to: "a@example.com" })), { signal: controller.signal }),
    );

    expect(error).toMatchObject({ retryable: true, code: "EABORT" });
    expect(server.connections).toBe(0);
  });
});
