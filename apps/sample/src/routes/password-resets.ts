import { randomBytes } from "node:crypto";
import { enqueue } from "@forge/jobs";
import { MAIL_JOB_TASK, messageToPayload } from "@forge/mail";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import type { AppConfig } from "../config.js";
import type { AppDatabase } from "../db.js";
import { QUEUES } from "../handlers.js";
import { mailConcurrencyKey } from "../mail-limits.js";
import { problemResponses, Accepted, OrgParams, PasswordResetBody } from "../schemas.js";

/**
 * POST /orgs/:org/password-resets `{ email }` — one transactional mail, 202 at once. It goes
 * through the same queue, provider and limits as campaigns: what keeps it from waiting behind
 * another org's campaign is its tenant (its fair-share group), not a queue of its own.
 *
 * The sample has no user accounts: it mails a one-time code to the address given and keeps
 * nothing. Your app looks the address up, stores a hash of the code with an expiry, and
 * answers 202 whether or not the address has an account.
 */
export function passwordResetRoutes(app: FastifyInstance, db: AppDatabase, config: Pick<AppConfig, "mailFrom" | "mailProvider">): void {
  const schema = {
    summary: "Mail a password reset code",
    params: OrgParams,
    body: PasswordResetBody,
    response: { 202: Accepted.passwordReset, ...problemResponses(400, 415) },
  };
  app.withTypeProvider<TypeBoxTypeProvider>().post("/orgs/:org/password-resets", { schema }, async (request, reply) => {
    const { org } = request.params;
    // The schema checked its shape; spaces around it are allowed, and cut here.
    const email = request.body.email.trim();

    const code = randomBytes(6).toString("hex").toUpperCase();
    const jobId = await enqueue(
      MAIL_JOB_TASK,
      messageToPayload({
        from: config.mailFrom,
        to: [{ name: "", address: email }],
        subject: "Reset your password",
        text: `Your password reset code for ${org}: ${code}\nIt is valid for 30 minutes. If you did not ask for it, ignore this mail.`,
      }),
      {
        db: db.jobs,
        queue: QUEUES.mails,
        tenant: org,
        concurrencyKey: mailConcurrencyKey(config),
        maxAttempts: 5,
        // A second click while the first mail is still queued returns that job: one mail, not two.
        dedupKey: `password-reset:${org}:${email.toLowerCase()}`,
      },
    );
    return reply.code(202).send({ jobId, status: `/orgs/${org}/jobs/${jobId}` });
  });
}
