import { MailPayloadError } from "./errors.js";

/**
 * nodemailer builds the SMTP envelope from the To, Cc, Bcc, From, Sender and Reply-To it
 * finds among custom headers, so an address given there would be mailed without the
 * address checks and without the suppression list seeing it. Each maps to the payload
 * field that carries it.
 */
const ADDRESS_HEADERS: ReadonlyMap<string, string> = new Map([
  ["to", "to"],
  ["cc", "cc"],
  ["bcc", "bcc"],
  ["from", "from"],
  ["sender", "from"],
  ["reply-to", "replyTo"],
]);

// Resent fields name recipients too (some MTAs deliver by them); a mail job has no use for them.
const RESENT_HEADERS: ReadonlySet<string> = new Set(["resent-to", "resent-cc", "resent-bcc", "resent-from", "resent-sender"]);

/** Throws when a custom header's name is an address header, saying which field to use instead. */
export function refuseAddressHeader(field: string, key: string): void {
  const name = key.toLowerCase();
  const instead = ADDRESS_HEADERS.get(name);
  if (instead !== undefined) {
    throw new MailPayloadError(
      field,
      `'${key}' is an address header: give the address in the ${instead} field instead ` +
        "(addresses in headers would escape the address checks and the suppression list)",
    );
  }
  if (RESENT_HEADERS.has(name)) {
    throw new MailPayloadError(field, `'${key}' is an address header: resent fields are not supported; give the recipients in the to, cc or bcc fields`);
  }
}
