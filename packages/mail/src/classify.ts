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

/** Wraps whatever a transport threw in a `MailSendError` that carries the verdict. */
export function classifySendError(error: unknown): MailSendError {
  if (error instanceof MailSendError) return error;
  const fields: TransportErrorFields = typeof error === "object" && error !== null ? error : {};
  const message = asString(fields.message) ?? String(error);
  return new MailSendError(message, {
    retryable: isRetryable(error),
    code: asString(fields.code),
    responseCode: replyCode(fields.responseCode),
    response: asString(fields.response),
    command: asString(fields.command),
    cause: error,
  });
}
