import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createMailHandler, MailPayloadError, messageToPayload, previewMail } from "../src/index.js";
import { attachmentBytes, decodeWords, headerValues, startSmtpServer, type TestSmtpServer } from "./helpers/smtp.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

const campaign = messageToPayload({
  from: '"Zoë Müller" <zoe@example.org>',
  to: "Alice <alice@example.com>",
  subject: "Soldes d'hiver <50%>",
  text: "Bonjour Alice",
  html: '<h1>Bonjour</h1><script>alert("x")</script><p>Fin</p>',
  headers: { "X-Campaign": "acme/42" },
  attachments: [{ filename: "tarifs.txt", content: "prix" }],
});

describe("previewMail", () => {
  it("renders the .eml that would be sent, without any connection", async () => {
    const server: TestSmtpServer = await startSmtpServer();
    cleanups.push(() => server.close());
    const { eml } = await previewMail(JSON.parse(JSON.stringify(campaign)) as unknown);
    const raw = eml.toString("utf8");
    expect(raw).toMatch(/\r\n/);
    expect(decodeWords(headerValues(raw, "Subject")[0]!)).toBe("Soldes d'hiver <50%>");
    expect(headerValues(raw, "To")).toEqual(["Alice <alice@example.com>"]);
    expect(headerValues(raw, "X-Campaign")).toEqual(["acme/42"]);
    expect(attachmentBytes(raw, "tarifs.txt").toString()).toBe("prix");
    expect(server.connections).toBe(0);

    // The preview's body is the body the handler sends.
    await createMailHandler({ transport: server.url })(campaign);
    const sent = server.delivered[0]!.raw;
    const body = (message: string): string => message.slice(message.indexOf("\r\n\r\n")).replace(/_NmP-[0-9a-f]+-/g, "_NmP-BOUNDARY-");
    expect(body(raw)).toBe(body(sent));
  });

  it("renders an HTML page: headers escaped, the mail's HTML in a sandboxed frame with no scripts allowed", async () => {
    const { html } = await previewMail(campaign);
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain("<th>Subject</th><td>Soldes d&#39;hiver &#60;50%&#62;</td>");
    expect(html).toContain("<th>X-Campaign</th><td>acme/42</td>");
    expect(html).toContain("<th>Attachments</th><td>tarifs.txt</td>");
    expect(html).toContain('<iframe sandbox srcdoc="&#60;h1&#62;Bonjour&#60;/h1&#62;&#60;script&#62;');
    expect(html).not.toContain("<script>");
  });

  it("shows a text-only message as text, and does not read path attachments unless asked", async () => {
    const dir = await mkdtemp(join(tmpdir(), "forge-mail-preview-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, "invoice.txt");
    await writeFile(file, "INVOICE 42");
    const payload = messageToPayload({
      from: "a@example.org",
      to: "b@example.com",
      subject: "Invoice",
      text: "See <attached>",
      attachments: [{ filename: "invoice.txt", path: file }],
    });
    const plain = await previewMail(payload);
    expect(plain.html).toContain('<pre style="white-space:pre-wrap">See &#60;attached&#62;</pre>');
    expect(attachmentBytes(plain.eml.toString(), "invoice.txt").toString()).toBe(`[read from ${file} when sent]`);
    const read = await previewMail(payload, { readFiles: true });
    expect(attachmentBytes(read.eml.toString(), "invoice.txt").toString()).toBe("INVOICE 42");
  });

  it("refuses an invalid payload as the handler would", async () => {
    await expect(previewMail({ v: 1, subject: "x" })).rejects.toThrow(MailPayloadError);
    await expect(previewMail({ v: 1, to: [{ name: "", address: "a@example.com" }], subject: "a\r\nBcc: x@y.z" })).rejects.toThrow(/line break/);
  });

  it("applies defaults as the handler does", async () => {
    const { eml } = await previewMail(messageToPayload({ to: "b@example.com", subject: "Hi", text: "x" }), { defaults: { from: "Shop <shop@example.org>" } });
    expect(headerValues(eml.toString(), "From")).toEqual(["Shop <shop@example.org>"]);
  });
});
