import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";

/**
 * How a browser proves it knows the admin token without carrying it in URLs (where it lands in
 * access logs, browser history and every form's action): a login form posts the token once and
 * gets a signed, expiring, HttpOnly cookie. Scripts send `Authorization: Bearer <token>`.
 * The signature key derives from the token: changing ADMIN_TOKEN ends every session.
 */
export const SESSION_COOKIE = "forge_admin";
export const SESSION_SECONDS = 8 * 3600;

function digest(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

function same(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

export class AdminAuth {
  private readonly expected: Buffer;
  private readonly key: Buffer;

  constructor(token: string) {
    this.expected = digest(token);
    this.key = digest(`forge-sample admin session:${token}`);
  }

  /** True when `token` is the admin token (compared in constant time). */
  matches(token: string | undefined): boolean {
    return token !== undefined && same(digest(token), this.expected);
  }

  /** A cookie value valid until `now + SESSION_SECONDS`. */
  issue(now = Date.now()): string {
    const expires = String(Math.floor(now / 1000) + SESSION_SECONDS);
    return `${expires}.${this.sign(expires)}`;
  }

  /** Whether the request carries the Bearer token or a valid, unexpired session cookie. */
  allows(request: FastifyRequest, now = Date.now()): boolean {
    const header = request.headers.authorization;
    if (header?.startsWith("Bearer ")) return this.matches(header.slice("Bearer ".length).trim());
    const cookie = readCookie(request.headers.cookie, SESSION_COOKIE);
    const [expires, signature] = cookie?.split(".") ?? [];
    if (!expires || !signature || !/^\d{1,12}$/.test(expires) || Number(expires) * 1000 <= now) return false;
    return same(Buffer.from(signature), Buffer.from(this.sign(expires)));
  }

  private sign(expires: string): string {
    return createHmac("sha256", this.key).update(expires).digest("base64url");
  }
}

export function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return undefined;
}
