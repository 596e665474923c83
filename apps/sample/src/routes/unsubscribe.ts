import { verifyUnsubscribeToken, type UnsubscribeTokenCheck } from "@forge/mail";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { UnsubscribeConfig } from "../campaign-message.js";
import type { AppDatabase } from "../db.js";
import { suppressionList } from "../suppression.js";

const escape = (value: string): string => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(reply: FastifyReply, status: number, title: string, body: string): FastifyReply {
  return reply
    .code(status)
    .type("text/html; charset=utf-8")
    .header("cache-control", "no-store")
    .header("content-security-policy", "default-src 'none'; form-action 'self'")
    .send(`<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title></head><body><h1>${escape(title)}</h1>${body}</body></html>\n`);
}

const REFUSED: Record<Extract<UnsubscribeTokenCheck, { ok: false }>["reason"], string> = {
  malformed: "This unsubscribe link is incomplete: open the link from the mail again.",
  "bad-signature": "This unsubscribe link is not valid.",
  expired: "This unsubscribe link has expired: use the link in a more recent mail, or write to us.",
};

/**
 * RFC 8058 one-click unsubscribe. Mail providers POST `List-Unsubscribe=One-Click` to the URL
 * of the `List-Unsubscribe` header (the token is in its query); a person who opens the link
 * gets GET, a page with a button that POSTs. GET changes nothing: link scanners fetch URLs.
 * Registered only when UNSUBSCRIBE_SECRET is set.
 */
export function unsubscribeRoutes(app: FastifyInstance, db: AppDatabase, config: UnsubscribeConfig): void {
  const secret = config.unsubscribeSecret;
  if (!secret) return;

  void app.register(async (scope) => {
    // The one-click body is a form; this app has no form parser elsewhere. Its content is not needed.
    scope.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string", bodyLimit: 4096 }, (_request, body, done) => done(null, body));

    scope.get<{ Querystring: { token?: string } }>("/unsubscribe", async (request, reply) => {
      const check = verifyUnsubscribeToken(request.query.token, { secret });
      if (!check.ok) return page(reply, 400, "Unsubscribe", `<p>${escape(REFUSED[check.reason])}</p>`);
      const action = `/unsubscribe?token=${encodeURIComponent(request.query.token!)}`;
      return page(
        reply,
        200,
        "Unsubscribe",
        `<p>Stop sending newsletters and campaigns to <strong>${escape(check.address)}</strong>?</p>` +
          `<form method="post" action="${escape(action)}"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`,
      );
    });

    scope.post<{ Querystring: { token?: string } }>("/unsubscribe", async (request, reply) => {
      const check = verifyUnsubscribeToken(request.query.token, { secret });
      if (!check.ok) return page(reply, 400, "Unsubscribe", `<p>${escape(REFUSED[check.reason])}</p>`);
      await suppressionList(db).add([{ address: check.address, reason: "unsubscribe", detail: `one-click${check.list ? ` from ${check.list}` : ""}` }]);
      request.log.info({ list: check.list }, "unsubscribed");
      return page(reply, 200, "Unsubscribed", `<p>${escape(check.address)} will receive no more newsletters or campaigns.</p>`);
    });
  });
}
