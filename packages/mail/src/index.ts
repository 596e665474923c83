export { MAIL_JOB_TASK, type TaskName } from "./task.js";
export {
  messageToPayload,
  payloadToMessage,
  type Base64Bytes,
  type MailAddress,
  type MailAddressInput,
  type MailAddressListInput,
  type MailAttachment,
  type MailAttachmentPayload,
  type MailHeader,
  type MailHeaders,
  type MailMessage,
  type MailPayload,
  type MessageToPayloadOptions,
  type NodemailerAttachment,
  type NodemailerMessage,
} from "./payload.js";
export { DEFAULT_MAX_ATTACHMENT_BYTES, isMailPayload } from "./validate.js";
export { classifySendError, isRetryable, rateLimitSnoozeSeconds, DEFAULT_RATE_LIMIT_SNOOZE_SECONDS, type ClassifyOptions } from "./classify.js";
export { MailPayloadError, MailSendError, type MailSendErrorDetails } from "./errors.js";
export {
  createMailHandler,
  type MailHandler,
  type MailHandlerOptions,
  type MailJobContext,
  type MailSendResult,
  type MailTransporter,
  type MailTransportOptions,
  type SentMessageInfo,
} from "./handler.js";
