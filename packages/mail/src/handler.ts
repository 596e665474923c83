import nodemailer from "nodemailer";
import { sendWithSignal } from "./abort.js";
import { classifySendError, DEFAULT_RATE_LIMIT_SNOOZE_SECONDS } from "./classify.js";
import { MailPayloadError } from "./errors.js";
import type { MailPayload } from "./mail-payload.js";
import { normaliseMessage, toMessage, type MailMessage, type NodemailerMessage } from "./payload.js";
import { withoutSuppressed } from "./suppress-recipients.js";
import type { SuppressedRecipient, SuppressionList } from "./suppression.js";
import { parseMailPayload } from "./validate.js";

/** What a transport reports after a send; nodemailer's SMTP transport fills all of it. */
export interface SentMessageInfo {
  messageId?: string | undefined;
  accepted?: ReadonlyArray<string | { address: string }> | undefined;
  rejected?: ReadonlyArray<string | { address: string }> | undefined;
  response?: string | undefined;
}

/** Anything with nodemailer's promise `sendMail`, such as `nodemailer.createTransport(…)`. */
export interface MailTransporter {
  sendMail(message: NodemailerMessage): Promise<SentMessageInfo>;
}

/** nodemailer options sent along with each message. */
interface SendOptions {
  disableFileAccess?: boolean;
  disableUrlAccess?: boolean;
}

/**
 * Options for `nodemailer.createTransport` (e.g. `{ host, port, secure, auth }`). Typed
 * loosely so that this package's types do not require `@types/nodemailer`.
 */
export type MailTransportOptions = object;

export interface MailHandlerOptions {
  /**
   * A nodemailer transporter, transport options, or an SMTP URL
   * (`smtp://user:pass@host:587`). `undefined` is accepted by the type so that
   * `process.env.SMTP_URL` can be passed as is, and refused at once at run time.
   */
  transport: MailTransporter | MailTransportOptions | string | undefined;
  /** Fields used when the payload has none (field by field, like nodemailer's defaults), e.g. `{ from }`. */
  defaults?: MailMessage;
  /** Refuse attachments given by `path` (the worker's files). Default false. */
  disableFileAccess?: boolean;
  /** Refuse attachments given by `href` (URLs the worker would fetch). Default false. */
  disableUrlAccess?: boolean;
  /**
   * Seconds a job waits (snoozes, attempts unchanged) after an SMTP rate-limit reply that
   * states no delay of its own; `false` retries such replies like any 4xx. Default 60.
   */
  rateLimitSnooze?: number | false;
  /**
   * Consulted before every send: suppressed recipients are taken out of the message and
   * listed in the result's `suppressed`; a message left without recipients is not sent.
   */
  suppression?: SuppressionList | undefined;
}

/** The job's result: small, JSON, enough to trace the message at the relay. */
export interface MailSendResult {
  messageId: string;
  accepted: string[];
  rejected: string[];
  response: string;
  /** With a suppression list: the recipients it held back (never sent, never retried). */
  suppressed?: SuppressedRecipient[];
  /** Present when nothing was sent because every recipient is suppressed. */
  skipped?: "all-recipients-suppressed";
}

/**
 * What the queue hands a handler, as far as this package cares; a queue's richer
 * context fits it structurally.
 */
export interface MailJobContext {
  /** Fires when this worker no longer owns the job: the send is aborted. */
  signal?: AbortSignal | undefined;
}

export interface MailHandler {
  (payload: unknown, ctx?: MailJobContext): Promise<MailSendResult>;
  /**
   * Closes the transport the handler built from options or a URL, so that a pool's open
   * connections let the process exit. A transporter you passed is yours to close.
   */
  close(): void;
}

function isTransporter(value: object): value is MailTransporter {
  return typeof (value as { sendMail?: unknown }).sendMail === "function";
}

function toTransporter(transport: MailHandlerOptions["transport"]): MailTransporter {
  if (typeof transport === "string" && transport.trim() !== "") return nodemailer.createTransport(transport);
  if (typeof transport === "object" && transport !== null) {
    return isTransporter(transport) ? transport : nodemailer.createTransport(transport);
  }
  throw new TypeError(
    `createMailHandler: transport must be a nodemailer transporter, transport options or an SMTP URL; got ${
      transport === "" ? "an empty string" : String(transport)
    } (is SMTP_URL set?)`,
  );
}

/** Checked before sending: nodemailer would only fail mid-stream, with an error that looks transient. */
function refuseDisabledReferences(payload: MailPayload, options: SendOptions): void {
  payload.attachments?.forEach((attachment, i) => {
    if (attachment.path !== undefined && options.disableFileAccess) {
      throw new MailPayloadError(`attachments[${i}].path`, "file attachments are disabled for this handler (disableFileAccess)");
    }
    if (attachment.href !== undefined && options.disableUrlAccess) {
      throw new MailPayloadError(`attachments[${i}].href`, "URL attachments are disabled for this handler (disableUrlAccess)");
    }
  });
}

function checkRateLimitSnooze(value: unknown): number | false {
  if (value === undefined) return DEFAULT_RATE_LIMIT_SNOOZE_SECONDS;
  if (value === false || (typeof value === "number" && Number.isFinite(value) && value >= 0)) return value;
  throw new TypeError(`createMailHandler: rateLimitSnooze must be a number of seconds >= 0 or false; got ${String(value)}`);
}

function addresses(list: SentMessageInfo["accepted"]): string[] {
  return (list ?? []).map((entry) => (typeof entry === "string" ? entry : entry.address));
}

/**
 * The worker side: `{ [MAIL_JOB_TASK]: createMailHandler({ transport }) }`.
 *
 * The handler validates the payload (an invalid one throws `MailPayloadError`,
 * retryable: false), sends it, and resolves with `{ messageId, accepted, rejected,
 * response }`. Recipients refused while others were accepted are reported in
 * `rejected`, not thrown: a retry would send the accepted ones a second copy. A failed
 * send throws `MailSendError` whose `retryable` says whether another attempt can help.
 */
export function createMailHandler(options: MailHandlerOptions): MailHandler {
  const transporter = toTransporter(options.transport);
  const ownsTransporter = transporter !== options.transport;
  // Checked now so a bad default stops the worker at start-up, not every job.
  const defaults = options.defaults === undefined ? {} : parseMailPayload(normaliseMessage(options.defaults), { requireRecipient: false });
  const rateLimitSnooze = checkRateLimitSnooze(options.rateLimitSnooze);
  const sendOptions: SendOptions = {
    disableFileAccess: options.disableFileAccess ?? false,
    disableUrlAccess: options.disableUrlAccess ?? false,
  };

  const suppression = options.suppression;
  if (suppression !== undefined && typeof suppression?.isSuppressed !== "function") {
    throw new TypeError("createMailHandler: suppression must be a SuppressionList (e.g. createSqlSuppressionList({ query, dialect }))");
  }

  const send = async (payload: unknown, ctx?: MailJobContext): Promise<MailSendResult> => {
    let valid: MailPayload = { ...defaults, ...parseMailPayload(payload) };
    refuseDisabledReferences(valid, sendOptions);
    let suppressed: SuppressedRecipient[] | undefined;
    if (suppression) {
      const filtered = await withoutSuppressed(valid, suppression);
      suppressed = filtered.suppressed;
      // Ends the job done: a retry would find the same list, and the result says why.
      if (filtered.empty) return { messageId: "", accepted: [], rejected: [], response: "", suppressed, skipped: "all-recipients-suppressed" };
      valid = filtered.payload;
    }
    const message = { ...toMessage(valid), ...sendOptions };
    let info: SentMessageInfo;
    try {
      info = await sendWithSignal(() => transporter.sendMail(message), ctx?.signal);
    } catch (error) {
      throw classifySendError(error, { rateLimitSnooze });
    }
    return {
      messageId: info.messageId ?? "",
      accepted: addresses(info.accepted),
      rejected: addresses(info.rejected),
      response: info.response ?? "",
      ...(suppressed === undefined ? {} : { suppressed }),
    };
  };
  const close = (): void => {
    if (ownsTransporter) (transporter as { close?: () => void }).close?.();
  };
  return Object.assign(send, { close });
}
