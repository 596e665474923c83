import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";
import { mailConcurrencyKey } from "../src/mail-limits.js";

describe("the mail provider's configuration", () => {
  it("defaults: provider default (key smtp:default), 5 at once, 14 per second", () => {
    const config = loadConfig({});
    expect(mailConcurrencyKey(config)).toBe("smtp:default");
    expect(config.smtpLimit).toEqual({ concurrency: 5, rate: { limit: 14, perSeconds: 1 } });
  });

  it("reads MAIL_PROVIDER, SMTP_CONCURRENCY, SMTP_RATE_LIMIT and SMTP_RATE_PER_SECONDS; SMTP_RATE_LIMIT=0 is no rate", () => {
    const env = { MAIL_PROVIDER: "ses", SMTP_CONCURRENCY: "3", SMTP_RATE_LIMIT: "600", SMTP_RATE_PER_SECONDS: "60" };
    const config = loadConfig(env);
    expect(mailConcurrencyKey(config)).toBe("smtp:ses");
    expect(config.smtpLimit).toEqual({ concurrency: 3, rate: { limit: 600, perSeconds: 60 } });
    expect(loadConfig({ ...env, SMTP_RATE_LIMIT: "0" }).smtpLimit.rate).toBeNull();
  });

  it.each([
    [{ MAIL_PROVIDER: "SES" }, /MAIL_PROVIDER must be 1–63 lowercase letters.*"SES"/],
    [{ MAIL_PROVIDER: "smtp:*" }, /MAIL_PROVIDER/],
    [{ SMTP_CONCURRENCY: "0" }, /SMTP_CONCURRENCY must be an integer from 1 to 10000, got "0"/],
    [{ SMTP_RATE_LIMIT: "1.5" }, /SMTP_RATE_LIMIT must be an integer/],
    [{ SMTP_RATE_PER_SECONDS: "-1" }, /SMTP_RATE_PER_SECONDS must be a number above 0/],
  ])("refuses %j, naming the variable", (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
