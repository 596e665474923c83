import { MailSendError } from "./errors.js";

/**
 * The shape of a nodemailer error, read defensively: any transport may throw, and a
 * transport that is not SMTP may set none of these.
 */
interface TransportErrorFields {
  message?: unknown;
  code?: unknown;
  responseCode?: unknown;
  response?: unknown;
  command?: unknown;
  retryable?: unknown;
  rejectedErrors?: unknown;
}

/**
 * Errors that say the message itself cannot be sent as it is, when the server gave no
 * reply code to go by: no usable recipient or sender (EENVELOPE), a message the client
 * refuses (EMESSAGE), credentials missing from the configuration (EAUTH).
 */
const FINAL_WITHOUT_REPLY = new Set(["EENVELOPE", "EMESSAGE", "EAUTH", "EREQUIRETLS"]);

function replyCode(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) ? value : undefined;
}

function asString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/**
 * Whether another attempt can help. SMTP says so itself: 4xx is "try again later",
 * 5xx is "do not". Without a reply, trouble on the way (refused, reset, timeout, DNS) is
 * worth retrying, a message the client rejected before talking is not. Anything
 * unrecognised is retried, the queue's default, bounded by the job's maxAttempts.
 */
export function isRetryable(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return true;
  const fields = error as TransportErrorFields;
  if (typeof fields.retryable === "boolean") return fields.retryable;
  // Every recipient was refused: nobody got a copy, so a retry is harmless, and it helps
  // if any refusal was temporary.
  if (Array.isArray(fields.rejectedErrors) && fields.rejectedErrors.length > 0) {
    return fields.rejectedErrors.some((rejection: unknown) => {
      const code = replyCode((rejection as TransportErrorFields | null)?.responseCode);
      return code === undefined || code < 500;
    });
  }
  const code = replyCode(fields.responseCode);
  if (code !== undefined && code >= 400) return code < 500;
  return !FINAL_WITHOUT_REPLY.has(asString(fields.code) ?? "");
}

/** How long a rate-limit reply that names no delay snoozes the job, in seconds. */
export const DEFAULT_RATE_LIMIT_SNOOZE_SECONDS = 60;

export interface ClassifyOptions {
  /**
   * Seconds to snooze on an SMTP rate-limit reply that states no delay of its own, or
   * `false` to treat such replies as ordinary retryable errors. Default 60.
   */
  rateLimitSnooze?: number | false | undefined;
}

// 421 is the server closing the channel ("too many connections", "try again later"): waiting
// is the answer whatever its text. 450/451 (and Amazon SES's 454 "Throttling failure") mean a
// rate limit only when they say so; greylisting and full queues are ordinary retries.
const ALWAYS_RATE_LIMIT = new Set([421]);
const RATE_LIMIT_IF_SAID = new Set([450, 451, 454]);
const RATE_WORDS = /rate|limit|throttl|too many/i;
const STATED_DELAY = /(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)\b/i;

function unitSeconds(unit: string): number {
  const u = unit.toLowerCase();
  if (u === "ms" || u.startsWith("milli")) return 0.001;
  if (u.startsWith("min")) return 60;
  if (u.startsWith("h")) return 3600;
  return 1;
}

function statedDelaySeconds(text: string): number | undefined {
  const found = STATED_DELAY.exec(text);
  return found ? Number(found[1]) * unitSeconds(found[2]!) : undefined;
}

function isRateLimitReply(fields: TransportErrorFields): boolean {
  const code = replyCode(fields.responseCode);
  if (code === undefined) return false;
  if (ALWAYS_RATE_LIMIT.has(code)) return true;
  const text = `${asString(fields.response) ?? ""} ${asString(fields.message) ?? ""}`;
  return RATE_LIMIT_IF_SAID.has(code) && RATE_WORDS.test(text);
}

/**
 * Seconds to snooze for, when the server refused with a rate limit (421; 450, 451 or 454 that
 * speak of a rate, a limit, throttling or "too many"); undefined otherwise. A delay stated in
 * the reply ("try again in 30 seconds") wins over `rateLimitSnooze`.
 */
export function rateLimitSnoozeSeconds(error: unknown, options: ClassifyOptions = {}): number | undefined {
  const fallback = options.rateLimitSnooze ?? DEFAULT_RATE_LIMIT_SNOOZE_SECONDS;
  if (fallback === false || typeof error !== "object" || error === null) return undefined;
  const fields = error as TransportErrorFields;
  // Every recipient refused: one refusal that is a rate limit makes the whole send wait.
  const rejections = Array.isArray(fields.rejectedErrors) ? (fields.rejectedErrors as unknown[]) : [];
  const limited = [fields, ...rejections.filter((r): r is TransportErrorFields => typeof r === "object" && r !== null)].find(isRateLimitReply);
  if (!limited) return undefined;
  return statedDelaySeconds(asString(limited.response) ?? asString(limited.message) ?? "") ?? fallback;
}

/** Wraps whatever a transport threw in a `MailSendError` that carries the verdict. */
export function classifySendError(error: unknown, options: ClassifyOptions = {}): MailSendError {
  if (error instanceof MailSendError) return error;
  const fields: TransportErrorFields = typeof error === "object" && error !== null ? error : {};
  const message = asString(fields.message) ?? String(error);
  return new MailSendError(message, {
    retryable: isRetryable(error),
    snoozeSeconds: rateLimitSnoozeSeconds(error, options),
    code: asString(fields.code),
    responseCode: replyCode(fields.responseCode),
    response: asString(fields.response),
    command: asString(fields.command),
    cause: error,
  });
}
