import { createHmac, timingSafeEqual } from "node:crypto";
import { isEmailAddress } from "./address.js";
import { suppressionKey } from "./suppression.js";

/** How long an unsubscribe link keeps working by default: 90 days (old newsletters get clicked). */
export const DEFAULT_UNSUBSCRIBE_TTL_SECONDS = 90 * 24 * 3600;

const MIN_SECRET_LENGTH = 32;

export interface UnsubscribeTokenOptions {
  /** The HMAC key: at least 32 characters (or bytes), kept on the server, the same on every process. */
  secret: string | Uint8Array;
  /** Seconds the token stays valid; default `DEFAULT_UNSUBSCRIBE_TTL_SECONDS`. */
  ttlSeconds?: number | undefined;
  /** A list or topic name the token is for (e.g. an org's newsletter), carried and signed. */
  list?: string | undefined;
  /** The clock, for tests; default now. */
  now?: Date | undefined;
}

export interface VerifyUnsubscribeTokenOptions {
  secret: string | Uint8Array;
  now?: Date | undefined;
}

export type UnsubscribeTokenCheck =
  { ok: true; address: string; list: string | undefined; expiresAt: Date } | { ok: false; reason: "malformed" | "bad-signature" | "expired" };

interface TokenBody {
  a: string;
  e: number;
  l?: string;
}

function checkSecret(secret: unknown, where: string): void {
  const length = typeof secret === "string" ? secret.length : secret instanceof Uint8Array ? secret.byteLength : -1;
  if (length < MIN_SECRET_LENGTH) {
    throw new TypeError(`${where}: secret must be a string or bytes of at least ${MIN_SECRET_LENGTH} (e.g. openssl rand -hex 32)`);
  }
}

function sign(body: string, secret: string | Uint8Array): Buffer {
  return createHmac("sha256", secret).update(`forge-mail-unsubscribe.${body}`).digest();
}

/**
 * A signed, expiring token naming one address, to put in an unsubscribe URL: anyone who
 * holds it may unsubscribe that address (and nothing else) until it expires. It is not
 * encrypted: the address can be read from it, as from the mail it came in.
 */
export function createUnsubscribeToken(address: string, options: UnsubscribeTokenOptions): string {
  checkSecret(options.secret, "createUnsubscribeToken");
  const key = typeof address === "string" ? suppressionKey(address) : "";
  if (key === "" || /[\r\n]/.test(key))
    throw new TypeError(`createUnsubscribeToken: address must be a non-empty one-line string; got ${JSON.stringify(address)}`);
  // A token for a non-address would verify, and its `address` would then be added to the
  // suppression list, where it matches no recipient: the person would go on getting mail.
  if (!isEmailAddress(key)) {
    throw new TypeError(
      "createUnsubscribeToken: address must be the recipient's email address alone, such as alice@example.com " +
        `(no display name, one address); got ${JSON.stringify(address)}`,
    );
  }
  const ttl = options.ttlSeconds ?? DEFAULT_UNSUBSCRIBE_TTL_SECONDS;
  if (!Number.isFinite(ttl) || ttl <= 0) throw new TypeError(`createUnsubscribeToken: ttlSeconds must be a number of seconds above 0; got ${String(ttl)}`);
  const now = options.now ?? new Date();
  const body: TokenBody = { a: key, e: Math.floor(now.getTime() / 1000 + ttl) };
  if (options.list !== undefined) body.l = options.list;
  const encoded = Buffer.from(JSON.stringify(body)).toString("base64url");
  return `${encoded}.${sign(encoded, options.secret).toString("base64url")}`;
}

function parseBody(encoded: string): TokenBody | undefined {
  try {
    const body: unknown = JSON.parse(Buffer.from(encoded, "base64url").toString("utf8"));
    if (typeof body !== "object" || body === null) return undefined;
    const { a, e, l } = body as Record<string, unknown>;
    if (typeof a !== "string" || a === "" || typeof e !== "number" || !Number.isFinite(e)) return undefined;
    if (l !== undefined && typeof l !== "string") return undefined;
    return l === undefined ? { a, e } : { a, e, l };
  } catch {
    return undefined;
  }
}

/** Checks a token's signature, then its expiry; never throws on a bad token (only on a bad secret). */
export function verifyUnsubscribeToken(token: unknown, options: VerifyUnsubscribeTokenOptions): UnsubscribeTokenCheck {
  checkSecret(options.secret, "verifyUnsubscribeToken");
  if (typeof token !== "string" || token.length > 2048) return { ok: false, reason: "malformed" };
  const match = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(token);
  if (!match) return { ok: false, reason: "malformed" };
  const [, encoded, signature] = match as unknown as [string, string, string];
  const given = Buffer.from(signature, "base64url");
  const expected = sign(encoded, options.secret);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: "bad-signature" };
  const body = parseBody(encoded);
  if (!body) return { ok: false, reason: "malformed" };
  const now = options.now ?? new Date();
  if (now.getTime() >= body.e * 1000) return { ok: false, reason: "expired" };
  return { ok: true, address: body.a, list: body.l, expiresAt: new Date(body.e * 1000) };
}

/**
 * The two headers of RFC 8058 one-click unsubscribe, for bulk mail: put them in the
 * message's `headers`. `url` must be HTTPS (mail providers ignore anything else) and
 * should carry the token; a `mailto` may be offered as well (RFC 2369).
 */
export function listUnsubscribeHeaders(url: string, options: { mailto?: string | undefined } = {}): Record<string, string> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`listUnsubscribeHeaders: url must be an absolute https:// URL; got ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== "https:") throw new TypeError(`listUnsubscribeHeaders: url must use https (RFC 8058); got ${parsed.protocol}`);
  if (/[\s<>]/.test(parsed.href)) throw new TypeError("listUnsubscribeHeaders: url must not contain spaces or angle brackets");
  const links = [`<${parsed.href}>`];
  if (options.mailto !== undefined) {
    if (!/^[^\s<>@]+@[^\s<>@]+$/.test(options.mailto))
      throw new TypeError(`listUnsubscribeHeaders: mailto must be an address; got ${JSON.stringify(options.mailto)}`);
    links.push(`<mailto:${options.mailto}?subject=unsubscribe>`);
  }
  return { "List-Unsubscribe": links.join(", "), "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" };
}
