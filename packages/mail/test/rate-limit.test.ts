import { afterEach, describe, expect, it } from "vitest";
import {
  classifySendError,
  createMailHandler,
  DEFAULT_RATE_LIMIT_SNOOZE_SECONDS,
  MailSendError,
  messageToPayload,
  rateLimitSnoozeSeconds,
  type MailHandlerOptions,
} from "../src/index.js";
import { startSmtpServer, type SmtpBehaviour, type TestSmtpServer } from "./helpers/smtp.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function smtp(behaviour: SmtpBehaviour): Promise<TestSmtpServer> {
  const server = await startSmtpServer(behaviour);
  cleanups.push(() => server.close());
  return server;
}

const payload = JSON.parse(JSON.stringify(messageToPayload({ from: "app@example.org", to: "a@example.com", subject: "Hi", text: "Hello" }))) as unknown;

/** Sends through a real SMTP server on loopback that answers as told; returns what the handler threw. */
async function refusal(behaviour: SmtpBehaviour, options: Partial<MailHandlerOptions> = {}): Promise<MailSendError> {
  const server = await smtp(behaviour);
  try {
    await createMailHandler({ transport: server.url, ...options })(payload);
  } catch (error) {
    expect(error).toBeInstanceOf(MailSendError);
    expect(server.delivered).toEqual([]);
    return error as MailSendError;
  }
  throw new Error("expected the send to fail");
}

/** The structural protocol: what the queue reads, an own numeric property. */
function snoozeOf(error: object): number | undefined {
  return Object.hasOwn(error, "snoozeSeconds") ? (error as { snoozeSeconds: number }).snoozeSeconds : undefined;
}

describe("SMTP rate-limit replies snooze the job (a real SMTP server)", () => {
  it("421 when connecting (too many connections): snoozes for the default delay", async () => {
    const error = await refusal({ connect: [421, "Too many concurrent SMTP connections from this IP"] });
    expect(error.responseCode).toBe(421);
    expect(snoozeOf(error)).toBe(DEFAULT_RATE_LIMIT_SNOOZE_SECONDS);
    expect(DEFAULT_RATE_LIMIT_SNOOZE_SECONDS).toBe(60);
  });

  it("421 to MAIL FROM, whatever its text", async () => {
    const error = await refusal({ mailFrom: [421, "Service not available, closing transmission channel"] });
    expect(error).toMatchObject({ responseCode: 421, retryable: true });
    expect(snoozeOf(error)).toBe(60);
  });

  it("451 'rate limit' to RCPT TO, stating a delay: snoozes for that delay", async () => {
    const error = await refusal({ rcptTo: () => [451, "4.7.1 Rate limit exceeded, try again in 30 seconds"] });
    expect(error.responseCode).toBe(451);
    expect(snoozeOf(error)).toBe(30);
  });

  it("450 'too many messages' at the end of DATA, and 451 'throttled' in minutes", async () => {
    expect(snoozeOf(await refusal({ data: [450, "4.2.1 Too many messages, slow down"] }))).toBe(60);
    expect(snoozeOf(await refusal({ mailFrom: [451, "Throttled: retry in 2 minutes"] }))).toBe(120);
  });

  it("rateLimitSnooze sets the delay when the reply states none, and false turns the snooze off", async () => {
    expect(snoozeOf(await refusal({ mailFrom: [421, "Try later"] }, { rateLimitSnooze: 5 }))).toBe(5);
    expect(snoozeOf(await refusal({ mailFrom: [421, "Try again in 10s"] }, { rateLimitSnooze: 5 }))).toBe(10);
    const off = await refusal({ mailFrom: [421, "Try later"] }, { rateLimitSnooze: false });
    expect(off).toMatchObject({ retryable: true, responseCode: 421 });
    expect(Object.hasOwn(off, "snoozeSeconds")).toBe(false);
  });

  it("a 4xx that is not about a rate (greylisting, a full queue) is an ordinary retry: no snoozeSeconds at all", async () => {
    for (const behaviour of [{ rcptTo: () => [451, "Greylisted, try again in 5 minutes"] as const }, { data: [451, "Queue full"] as const }]) {
      const error = await refusal(behaviour);
      expect(error).toMatchObject({ retryable: true, responseCode: 451 });
      expect(Object.hasOwn(error, "snoozeSeconds")).toBe(false);
    }
  });

  it("a 5xx that mentions a limit is final, not a snooze", async () => {
    const error = await refusal({ data: [552, "Message size exceeds fixed maximum limit"] });
    expect(error).toMatchObject({ retryable: false, responseCode: 552 });
    expect(Object.hasOwn(error, "snoozeSeconds")).toBe(false);
  });

  it("refuses a bad rateLimitSnooze when the handler is created", () => {
    for (const bad of [-1, NaN, Infinity, "60", true]) {
      expect(() => createMailHandler({ transport: "smtp://127.0.0.1:25", rateLimitSnooze: bad as never })).toThrow(
        /rateLimitSnooze must be a number of seconds >= 0 or false/,
      );
    }
  });
});

describe("rateLimitSnoozeSeconds", () => {
  const reply = (responseCode: number, response: string, extra: object = {}) =>
    Object.assign(new Error(`failed: ${response}`), { responseCode, response, ...extra });

  it.each([
    ["421 greeting", reply(421, "421 mx.example.com Service not available"), 60],
    ["Amazon SES throttling", reply(454, "454 Throttling failure: Maximum sending rate exceeded."), 60],
    ["seconds, abbreviated", reply(451, "451 4.7.1 rate limited, retry after 45s"), 45],
    ["an hour", reply(450, "450 Too many messages, try again in 1 hour"), 3600],
    ["milliseconds", reply(451, "451 Rate limit: wait 500 ms"), 0.5],
    ["the enhanced status code is not a delay", reply(451, "451 4.7.0 Rate limit exceeded"), 60],
    ["no rate words", reply(451, "451 4.3.0 Local error in processing"), undefined],
    ["452 too many recipients is not a rate", reply(452, "452 4.5.3 Too many recipients"), undefined],
    ["no reply at all", Object.assign(new Error("connect ECONNREFUSED"), { code: "ESOCKET" }), undefined],
  ])("%s", (_name, error, expected) => {
    expect(rateLimitSnoozeSeconds(error)).toBe(expected);
  });

  it("every recipient refused, one of them by a rate limit: the send snoozes", () => {
    const error = reply(550, "550 No such user", {
      rejectedErrors: [reply(550, "550 No such user"), reply(451, "451 Rate limit exceeded, try again in 20 seconds")],
    });
    expect(rateLimitSnoozeSeconds(error)).toBe(20);
    expect(snoozeOf(classifySendError(error))).toBe(20);
  });

  it("classifySendError sets snoozeSeconds only on a rate limit, and honours rateLimitSnooze", () => {
    expect(snoozeOf(classifySendError(reply(421, "421 Try later"), { rateLimitSnooze: 3 }))).toBe(3);
    expect(Object.hasOwn(classifySendError(reply(550, "550 No such user")), "snoozeSeconds")).toBe(false);
  });
});
