export { MAIL_JOB_TASK, type TaskName } from "./task.js";
export {
  messageToPayload,
  payloadToMessage,
  type Base64Bytes,
  type MailAddress,
  type MailAddressInput,
  type MailAddressListInput,
  type MailAttachment,
  type MailHeaders,
  type MailMessage,
  type MessageToPayloadOptions,
  type NodemailerAttachment,
  type NodemailerMessage,
} from "./payload.js";
export type { MailAttachmentPayload, MailHeader, MailPayload } from "./mail-payload.js";
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
export {
  suppressionKey,
  SUPPRESSION_REASONS,
  type SuppressedRecipient,
  type SuppressionEntry,
  type SuppressionInput,
  type SuppressionList,
  type SuppressionListQuery,
  type SuppressionReason,
} from "./suppression.js";
export {
  createSqlSuppressionList,
  suppressionTableSql,
  DEFAULT_SUPPRESSION_TABLE,
  type SqlQuery,
  type SqlSuppressionListOptions,
  type SuppressionDialect,
} from "./suppression-sql.js";
export {
  createUnsubscribeToken,
  verifyUnsubscribeToken,
  listUnsubscribeHeaders,
  DEFAULT_UNSUBSCRIBE_TTL_SECONDS,
  type UnsubscribeTokenCheck,
  type UnsubscribeTokenOptions,
  type VerifyUnsubscribeTokenOptions,
} from "./unsubscribe.js";
export { parseDeliveryStatus, isHardBounceStatus, type DeliveryStatusReport, type DsnRecipient } from "./dsn.js";
export { deliveryEventsFromMessage, suppressionsFromEvents, recordDeliveryEvents } from "./delivery-events.js";
export type { DeliveryEvent } from "./delivery-event.js";
export { parseSesNotification, verifySnsSignature, isSnsCertificateUrl, type SesNotification } from "./ses.js";
export { DKIM_HEADER_FIELD_NAMES } from "./dkim.js";
export { previewMail, type MailPreview, type MailPreviewOptions } from "./preview.js";
