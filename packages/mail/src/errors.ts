/**
 * The payload cannot become a mail. `retryable` is an own property set to false so the
 * queue fails the job at once: no retry will ever fix the data.
 */
export class MailPayloadError extends Error {
  override readonly name = "MailPayloadError";
  readonly retryable = false as const;
  /** Where the problem is, e.g. `to[1]`, `subject`, `attachments[0].content`. */
  readonly field: string;

  constructor(field: string, problem: string) {
    super(`${field}: ${problem}`);
    this.field = field;
  }
}

export interface MailSendErrorDetails {
  retryable: boolean;
  /** Seconds to wait before sending again, on a rate-limit reply; absent otherwise. */
  snoozeSeconds?: number | undefined;
  /** nodemailer's error code (`ECONNECTION`, `ETIMEDOUT`, `EDNS`, `EENVELOPE`, …), or `EABORT`. */
  code?: string | undefined;
  /** The SMTP reply code, when the server answered (451, 550, …). */
  responseCode?: number | undefined;
  /** The server's full reply line, when it answered. */
  response?: string | undefined;
  /** The SMTP command that failed (`CONN`, `MAIL FROM`, `RCPT TO`, `DATA`, …). */
  command?: string | undefined;
  cause?: unknown;
}

/**
 * Sending failed. `retryable` (an own property) tells the queue whether another attempt
 * can help: true for network trouble and 4xx replies, false for 5xx replies. On a rate-limit
 * reply it also has an own `snoozeSeconds`, which a queue that follows the structural
 * protocol reads as "run this job again in that many seconds, without using an attempt".
 */
export class MailSendError extends Error {
  override readonly name = "MailSendError";
  readonly retryable: boolean;
  // `declare`: no own property at all unless set, since an own `snoozeSeconds` that is not
  // a number would tell the queue this was a snooze gone wrong.
  declare readonly snoozeSeconds?: number;
  readonly code: string | undefined;
  readonly responseCode: number | undefined;
  readonly response: string | undefined;
  readonly command: string | undefined;

  constructor(message: string, details: MailSendErrorDetails) {
    super(message, { cause: details.cause });
    this.retryable = details.retryable;
    if (details.snoozeSeconds !== undefined) this.snoozeSeconds = details.snoozeSeconds;
    this.code = details.code;
    this.responseCode = details.responseCode;
    this.response = details.response;
    this.command = details.command;
  }
}
