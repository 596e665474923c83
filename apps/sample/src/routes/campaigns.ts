import { enqueueMany, JobError } from "@forge/jobs";
import { MAIL_JOB_TASK, MailPayloadError, type MailPayload } from "@forge/mail";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { campaignMessage, type UnsubscribeConfig } from "../campaign-message.js";
import type { AppConfig } from "../config.js";
import type { AppDatabase } from "../db.js";
import { scheduleDigest } from "../digest.js";
import { QUEUES } from "../handlers.js";
import { mailConcurrencyKey } from "../mail-limits.js";
import { invalid, Problems } from "../problems.js";
import { Accepted, CampaignBody, CampaignParams, problemResponses, type CampaignRequest } from "../schemas.js";

/** What the schema cannot say: a blank subject or text, a repeated recipient. */
export function checkCampaign(campaign: CampaignRequest): void {
  const problems = new Problems();
  if (campaign.subject.trim() === "") problems.add("subject", "must not be blank");
  if (campaign.text.trim() === "") problems.add("text", "must not be blank");
  const seen = new Map<string, number>();
  campaign.recipients.forEach((recipient, i) => {
    const email = recipient.email.trim();
    const first = seen.get(email.toLowerCase());
    if (first !== undefined) problems.add(`recipients[${i}].email`, `repeats recipients[${first}].email`);
    else seen.set(email.toLowerCase(), i);
  });
  problems.check("The campaign cannot be sent as given.");
}

/**
 * POST /orgs/:org/campaigns/:id/send — one mail job per recipient, in one round trip, and
 * 202 at once: SMTP happens in the worker. The idempotency key makes a double click (or a
 * client retry) return the same jobs instead of sending twice.
 *
 * The org is the jobs' tenant, hence their fair-share group: a 50,000-mail campaign of one
 * org does not delay another org's mail. The concurrency key puts them under the provider's
 * limits (src/mail-limits.ts), shared with every other mail the app sends.
 */
export function campaignRoutes(
  app: FastifyInstance,
  db: AppDatabase,
  config: Pick<AppConfig, "mailFrom" | "mailProvider" | "digestTimezone"> & UnsubscribeConfig,
): void {
  const schema = {
    summary: "Send a campaign: one mail job per recipient",
    params: CampaignParams,
    body: CampaignBody,
    response: { 202: Accepted.campaign, ...problemResponses(400, 413, 415) },
  };
  app.withTypeProvider<TypeBoxTypeProvider>().post("/orgs/:org/campaigns/:id/send", { schema }, async (request, reply) => {
    const { org, id } = request.params;
    checkCampaign(request.body);
    const { subject, text, recipients } = request.body;

    let payloads: MailPayload[];
    try {
      // Bulk mail: each recipient's own one-click unsubscribe link (src/campaign-message.ts).
      payloads = recipients.map((r) => campaignMessage(config, org, id, { subject, text }, r));
    } catch (error) {
      // The mail package's own checks (header injection, addresses…): the request is at fault.
      if (error instanceof MailPayloadError) throw invalid("The campaign cannot be sent as given.", [{ field: error.field ?? "body", message: error.message }]);
      throw error;
    }

    let ids: number[];
    try {
      ids = await enqueueMany(
        recipients.map((r, i) => ({
          task: MAIL_JOB_TASK,
          payload: payloads[i]!,
          tenant: org,
          concurrencyKey: mailConcurrencyKey(config),
          maxAttempts: 5,
          idempotencyKey: `campaign:${org}:${id}:${r.email.trim().toLowerCase()}`,
        })),
        { queue: QUEUES.mails, db: db.jobs },
      );
    } catch (error) {
      if (error instanceof JobError) throw invalid("The campaign cannot be queued as given.", [{ field: error.field ?? "body", message: error.message }]);
      throw error;
    }
    // The org's daily digest: declared here, idempotent (the same definition changes nothing).
    await scheduleDigest(db.jobs, org, config);
    return reply.code(202).send({
      campaign: id,
      jobIds: ids,
      jobs: recipients.map((r, i) => ({ email: r.email.trim(), jobId: ids[i]!, status: `/orgs/${org}/jobs/${ids[i]}` })),
    });
  });
}
