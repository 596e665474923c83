/**
 * What a bounce, a complaint or a provider's webhook says about one recipient. Only
 * `hard-bounce` and `complaint` put the address on the suppression list; a soft bounce
 * (temporary, or a refusal of this message rather than of the address) does not.
 */
export interface DeliveryEvent {
  type: "hard-bounce" | "soft-bounce" | "complaint";
  address: string;
  /** The enhanced status code (`5.1.1`) for a bounce, the feedback type (`abuse`) for a complaint, when known. */
  status: string | undefined;
  /** One line for people: the diagnostic, the provider's reason. */
  detail: string;
  /** Where it came from: an RFC 3464 DSN, an RFC 5965 (ARF) complaint, or Amazon SES. */
  source: "dsn" | "arf" | "ses";
}
