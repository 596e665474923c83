import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

export const CSRF_COOKIE = "forge_jobs_csrf";
export const CSRF_FIELD = "csrf";
const NONCE = /^[A-Za-z0-9_-]{22,64}$/;

/**
 * Signed double-submit cookie: the browser holds a random nonce in a SameSite=Strict,
 * HttpOnly cookie scoped to the dashboard; each form carries HMAC(secret, nonce). A forged
 * form from another site can neither read the cookie nor compute the HMAC without the
 * secret, and a cookie planted by a sibling subdomain is useless without the secret too.
 */
export class Csrf {
  private readonly secret: Buffer;

  /** `secret`: share one between processes behind a load balancer; default: random per process. */
  constructor(
    secret: string | Buffer | undefined,
    private readonly cookiePath: string,
  ) {
    this.secret = secret === undefined ? randomBytes(32) : Buffer.from(secret);
    if (this.secret.length < 16) throw new TypeError("createDashboard: secret must be at least 16 bytes");
  }

  private sign(nonce: string): string {
    return createHmac("sha256", this.secret).update(`forge-jobs-dashboard:${nonce}`).digest("base64url");
  }

  /** The token for this browser's forms; sets the cookie on `res` when the browser has none yet. */
  issue(req: IncomingMessage, res: ServerResponse): string {
    let nonce = readCookie(req, CSRF_COOKIE);
    if (nonce === undefined || !NONCE.test(nonce)) {
      nonce = randomBytes(24).toString("base64url");
      const secure = (req.socket as { encrypted?: boolean }).encrypted ? "; Secure" : "";
      res.appendHeader("Set-Cookie", `${CSRF_COOKIE}=${nonce}; Path=${this.cookiePath}; HttpOnly; SameSite=Strict${secure}`);
    }
    return this.sign(nonce);
  }

  /** True when `token` (from the form) matches the cookie this request carries. */
  verify(req: IncomingMessage, token: string | undefined): boolean {
    const nonce = readCookie(req, CSRF_COOKIE);
    if (nonce === undefined || !NONCE.test(nonce) || typeof token !== "string") return false;
    const expected = Buffer.from(this.sign(nonce));
    const given = Buffer.from(token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}

export function readCookie(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
