import addressparser from "nodemailer/lib/addressparser/index.js";
import { MailPayloadError } from "./errors.js";
import { rejectLineBreaks } from "./text.js";

/** An address as the payload stores it: always both parts, `name` possibly empty. */
export interface MailAddress {
  name: string;
  address: string;
}

/** An address as a nodemailer message may give it. */
export interface MailAddressInput {
  name?: string | undefined;
  address: string;
}

/** One address or a list: `"a@x.org, Bob <b@y.org>"`, `{ name, address }`, or an array of either. */
export type MailAddressListInput = string | MailAddressInput | ReadonlyArray<string | MailAddressInput>;

type Parsed = ReturnType<typeof addressparser>[number];

function flatten(parsed: readonly Parsed[], out: MailAddress[]): void {
  for (const entry of parsed) {
    if ("group" in entry) {
      flatten(entry.group, out);
    } else if (entry.address === "") {
      // addressparser files a bare word such as "bob" under `name`; keep it where the
      // syntax check will see it and name it in its message.
      out.push({ name: "", address: entry.name });
    } else {
      out.push({ name: entry.name, address: entry.address });
    }
  }
}

/**
 * Flattens an address field to `{ name, address }` objects, in order. Syntax is checked
 * later, on the payload; CR/LF is checked here, before parsing, because addressparser
 * reads "a@x.org\r\nBcc: evil@y.org" as a group and would hand back a recipient.
 */
export function normaliseAddresses(field: string, input: unknown, { single = false } = {}): MailAddress[] {
  const out: MailAddress[] = [];
  const items: readonly unknown[] = Array.isArray(input) ? input : [input];
  for (const item of items) {
    const at = single ? field : `${field}[${out.length}]`;
    if (typeof item === "string") {
      rejectLineBreaks(at, item);
      flatten(addressparser(item), out);
    } else if (typeof item === "object" && item !== null && typeof (item as MailAddressInput).address === "string") {
      const { name, address } = item as MailAddressInput;
      if (name !== undefined && typeof name !== "string") {
        throw new MailPayloadError(`${at}.name`, "must be a string");
      }
      out.push({ name: name ?? "", address });
    } else {
      throw new MailPayloadError(at, "must be an address string or a { name, address } object");
    }
  }
  return out;
}

const DOMAIN_LABEL = "[\\p{L}\\p{N}](?:[\\p{L}\\p{N}-]*[\\p{L}\\p{N}])?";
const DOMAIN = new RegExp(`^(?:${DOMAIN_LABEL}(?:\\.${DOMAIN_LABEL})*|\\[[0-9A-Fa-f:.]+\\])$`, "u");
const LOCAL_ATOM = /^[^\s\p{Cc}@"(),:;<>[\\\]]+$/u;
const LOCAL_QUOTED = /^"(?:[^"\\\p{Cc}]|\\[^\p{Cc}])+"$/u;

/**
 * A pragmatic mailbox check (RFC 5321 shape, Unicode allowed): something before the
 * last `@`, a domain of labels or an address literal after it, nothing that could
 * close the `<…>` of an SMTP command.
 */
export function isEmailAddress(value: string): boolean {
  const at = value.lastIndexOf("@");
  if (at <= 0 || value.length > 254) return false;
  const local = value.slice(0, at);
  const domain = value.slice(at + 1);
  if (local.length > 64 || !DOMAIN.test(domain)) return false;
  if (LOCAL_QUOTED.test(local)) return true;
  return LOCAL_ATOM.test(local) && !local.startsWith(".") && !local.endsWith(".") && !local.includes("..");
}
