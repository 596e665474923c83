import { afterEach, describe, expect, it } from "vitest";
import { createMailHandler, messageToPayload, type MailHandler } from "../src/index.js";
import { startSmtpServer, type TestSmtpServer } from "./helpers/smtp.js";

const cleanups: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function smtp(): Promise<TestSmtpServer> {
  const server = await startSmtpServer();
  cleanups.push(() => server.close());
  return server;
}

function handlerFor(transport: object | string): MailHandler {
  const handler = createMailHandler({ transport, defaults: { from: "campaigns@example.org" } });
  cleanups.push(() => handler.close());
  return handler;
}

const RECIPIENTS = Array.from({ length: 30 }, (_, i) => `reader${i + 1}@example.com`);

/** A campaign's sends all in flight at once, as a worker with enough concurrency runs them. */
async function campaign(handler: MailHandler): Promise<void> {
  const results = await Promise.all(
    RECIPIENTS.map((to, i) => handler(JSON.parse(JSON.stringify(messageToPayload({ to, subject: `Issue ${i + 1}`, text: `Hello ${to}` }))))),
  );
  expect(results.map((r) => r.accepted)).toEqual(RECIPIENTS.map((to) => [to]));
}

function deliveredTo(server: TestSmtpServer): string[] {
  return server.delivered.flatMap((m) => m.rcptTo).sort();
}

/** Resolves once every session the server opened has ended. */
async function allClosed(server: TestSmtpServer): Promise<void> {
  while (server.closes < server.connections) {
    await Promise.race([
      server.nextClose(),
      new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error(`${server.connections - server.closes} sessions still open`)), 5000)),
    ]);
  }
}

describe("a campaign through a pooled transport", () => {
  it("without a pool, every message opens a connection of its own (what the pooled cases are compared with)", async () => {
    const server = await smtp();
    await campaign(handlerFor(server.url));
    expect(deliveredTo(server)).toEqual([...RECIPIENTS].sort());
    expect(server.connections).toBe(RECIPIENTS.length);
  });

  it("pool: true, maxConnections: 3 delivers all 30 messages over 3 connections, and close() ends them", async () => {
    const server = await smtp();
    const handler = handlerFor({ host: "127.0.0.1", port: server.port, secure: false, pool: true, maxConnections: 3 });
    await campaign(handler);
    expect(deliveredTo(server)).toEqual([...RECIPIENTS].sort());
    expect(server.delivered.every((m) => m.mailFrom === "campaigns@example.org")).toBe(true);
    expect(server.connections).toBe(3);
    // A second campaign reuses the open connections rather than dialling again.
    await campaign(handler);
    expect(server.delivered).toHaveLength(2 * RECIPIENTS.length);
    expect(server.connections).toBe(3);
    expect(server.closes).toBe(0);
    handler.close();
    await allClosed(server);
    expect(server.closes).toBe(3);
  });

  it("the pool options can ride on the SMTP URL (?pool=true&maxConnections=2), as a worker's SMTP_URL may carry them", async () => {
    const server = await smtp();
    const handler = handlerFor(`${server.url}/?pool=true&maxConnections=2`);
    await campaign(handler);
    expect(deliveredTo(server)).toEqual([...RECIPIENTS].sort());
    expect(server.connections).toBe(2);
    handler.close();
    await allClosed(server);
  });

  it("close() leaves alone a transporter the caller passed: its owner closes it", async () => {
    const server = await smtp();
    const nodemailer = (await import("nodemailer")).default;
    const transporter = nodemailer.createTransport({ host: "127.0.0.1", port: server.port, secure: false, pool: true, maxConnections: 1 });
    cleanups.push(() => transporter.close());
    const handler = handlerFor(transporter);
    await handler(messageToPayload({ from: "a@example.org", to: "b@example.com", subject: "s", text: "t" }));
    handler.close();
    await handler(messageToPayload({ from: "a@example.org", to: "c@example.com", subject: "s", text: "t" }));
    expect(server.connections).toBe(1);
    expect(server.closes).toBe(0);
  });
});
