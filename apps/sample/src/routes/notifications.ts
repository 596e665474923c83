import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import type { AppConfig } from "../config.js";
import { isEmail } from "../contacts.js";
import type { AppDatabase } from "../db.js";
import { listNotifications, notificationHooks, recordNotification } from "../notifications.js";
import { Problems } from "../problems.js";
import { OrgParams } from "../schemas.js";

const LINE_BREAK = /[\r\n]/;

/**
 * POST /orgs/:org/notifications `{ email, title, body }` — records an in-app notification; its
 * `notificationCreated` hook enqueues the email in the same transaction (src/notifications.ts).
 * GET /orgs/:org/notifications?email= — the address's notifications, newest first.
 */
export function notificationRoutes(app: FastifyInstance, db: AppDatabase, config: Pick<AppConfig, "mailFrom" | "mailProvider">): void {
  const hooks = notificationHooks(config);
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  typed.post("/orgs/:org/notifications", { schema: { params: OrgParams } }, async (request, reply) => {
    const problems = new Problems();
    const body: unknown = request.body;
    const fields = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
    const text = (name: string): string => (typeof fields[name] === "string" ? (fields[name] as string).trim() : "");
    const [email, title, message] = [text("email"), text("title"), text("body")];
    if (!isEmail(email)) problems.add("email", "is required: a valid email address");
    if (title === "" || title.length > 200 || LINE_BREAK.test(title)) problems.add("title", "is required: one line of at most 200 characters");
    if (message === "" || message.length > 10_000) problems.add("body", "is required: at most 10000 characters");
    for (const key of Object.keys(fields)) if (!["email", "title", "body"].includes(key)) problems.add(key, "is not a known field (email, title, body)");
    problems.check("The notification cannot be recorded as given.");
    const notification = await recordNotification(db, hooks, { org: request.params.org, email, title, body: message });
    return reply.code(201).send(notification);
  });

  typed.get("/orgs/:org/notifications", { schema: { params: OrgParams } }, async (request) => {
    const problems = new Problems();
    const email = (request.query as { email?: string }).email?.trim() ?? "";
    if (!isEmail(email)) problems.add("email", "is required: a valid email address");
    problems.check("No notifications can be listed for this request.");
    return { notifications: await listNotifications(db, request.params.org, email) };
  });
}
