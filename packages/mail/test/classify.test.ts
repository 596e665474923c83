import { describe, expect, it } from "vitest";
import { classifySendError, isRetryable, MailSendError } from "../src/index.js";

/** Builds an error shaped like nodemailer's. */
function smtpError(fields: Record<string, unknown>): Error {
  return Object.assign(new Error(String(fields.message ?? "failed")), fields);
}

describe("isRetryable", () => {
  it.each([
    ["connection refused", { code: "ESOCKET", message: "connect ECONNREFUSED 127.0.0.1:25", command: "CONN" }, true],
    ["connection closed", { code: "ECONNECTION", message: "Connection closed unexpectedly" }, true],
    ["greeting timeout", { code: "ETIMEDOUT", message: "Greeting never received" }, true],
    ["DNS failure", { code: "EDNS", message: "getaddrinfo ENOTFOUND smtp.example.invalid" }, true],
    ["421 service not available", { code: "EENVELOPE", responseCode: 421, response: "421 Try later" }, true],
    ["451 local error", { code: "EENVELOPE", responseCode: 451, response: "451 Greylisted" }, true],
    ["452 mailbox full", { code: "EMESSAGE", responseCode: 452 }, true],
    ["454 temporary auth failure", { code: "EAUTH", responseCode: 454 }, true],
    ["550 unknown mailbox", { code: "EENVELOPE", responseCode: 550, response: "550 No such user" }, false],
    ["552 too big", { code: "EMESSAGE", responseCode: 552 }, false],
    ["554 spam", { code: "EMESSAGE", responseCode: 554 }, false],
    ["535 bad credentials", { code: "EAUTH", responseCode: 535 }, false],
    ["missing credentials", { code: "EAUTH", message: 'Missing credentials for "PLAIN"' }, false],
    ["no recipients", { code: "EENVELOPE", message: "No recipients defined" }, false],
    ["message too large for the server", { code: "EMESSAGE", message: "Message size larger than allowed 1000" }, false],
    ["an unreadable attachment file", { code: "ENOENT", message: "ENOENT: no such file" }, true],
    ["something unknown", { message: "boom" }, true],
  ])("%s → %s", (_name, fields, expected) => {
    expect(isRetryable(smtpError(fields))).toBe(expected);
  });

  it("all recipients refused: retryable only if one refusal was temporary", () => {
    const refused = (...codes: number[]) =>
      smtpError({
        code: "EENVELOPE",
        responseCode: codes.at(-1),
        rejectedErrors: codes.map((responseCode) => smtpError({ code: "EENVELOPE", responseCode })),
      });
    expect(isRetryable(refused(550, 550))).toBe(false);
    expect(isRetryable(refused(451, 550))).toBe(true);
    expect(isRetryable(refused(550, 451))).toBe(true);
  });

  it("trusts an explicit retryable flag", () => {
    expect(isRetryable(smtpError({ retryable: false, code: "ECONNECTION" }))).toBe(false);
    expect(isRetryable(smtpError({ retryable: true, responseCode: 550 }))).toBe(true);
  });

  it("retries what is not even an object", () => {
    expect(isRetryable("boom")).toBe(true);
    expect(isRetryable(undefined)).toBe(true);
  });
});

describe("classifySendError", () => {
  it("keeps the details and the cause, with retryable as an own property", () => {
    const cause = smtpError({ message: "Can't send mail", code: "EENVELOPE", responseCode: 550, response: "550 No such user", command: "RCPT TO" });
    const error = classifySendError(cause);

    expect(error).toBeInstanceOf(MailSendError);
    expect(Object.hasOwn(error, "retryable")).toBe(true);
    expect(error).toMatchObject({
      name: "MailSendError",
      message: "Can't send mail",
      retryable: false,
      code: "EENVELOPE",
      responseCode: 550,
      response: "550 No such user",
      command: "RCPT TO",
      cause,
    });
  });

  it("wraps odd throwables and passes its own errors through", () => {
    expect(classifySendError("boom")).toMatchObject({ message: "boom", retryable: true, code: undefined });
    const own = new MailSendError("x", { retryable: false });
    expect(classifySendError(own)).toBe(own);
  });
});
