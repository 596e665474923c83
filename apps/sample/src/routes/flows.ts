import { MAIL_JOB_TASK, MailPayloadError } from "@forge/mail";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { campaignMessage, type UnsubscribeConfig } from "../campaign-message.js";
import type { AppConfig } from "../config.js";
import { isEmail } from "../contacts.js";
import type { AppDatabase } from "../db.js";
import { campaignSend, sendCampaignBatch, setOrgAdmins } from "../flows.js";
import { mailConcurrencyKey } from "../mail-limits.js";
import { invalid, notFound, Problems } from "../problems.js";
import { CampaignBody, CampaignParams, OrgParams } from "../schemas.js";
import { checkCampaign } from "./campaigns.js";

/**
 * PUT /orgs/:org/admins — who receives the org's import reports: { emails: [...] }.
 * POST /orgs/:org/campaigns/:id/batch — the campaign as one batch; its callback marks it sent.
 * GET /orgs/:org/campaigns/:id/batch — the send: its jobs, and once sent, when and the counts.
 */
export function flowRoutes(app: FastifyInstance, db: AppDatabase, config: Pick<AppConfig, "mailFrom" | "mailProvider"> & UnsubscribeConfig): void {
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  typed.put("/orgs/:org/admins", { schema: { params: OrgParams } }, async (request, reply) => {
    const problems = new Problems();
    const emails = (request.body as { emails?: unknown } | null)?.emails;
    if (!Array.isArray(emails) || emails.some((e) => typeof e !== "string" || !isEmail(e))) problems.add("emails", "must be an array of email addresses");
    problems.check("The admins cannot be set as given.");
    await setOrgAdmins(db, request.params.org, emails as string[]);
    return reply.code(204).send();
  });

  typed.post("/orgs/:org/campaigns/:id/batch", { schema: { params: CampaignParams, body: CampaignBody } }, async (request, reply) => {
    const { org, id } = request.params;
    checkCampaign(request.body);
    const campaign = request.body;
    let items;
    try {
      items = campaign.recipients.map((r) => ({
        task: MAIL_JOB_TASK as string,
        // Bulk mail: the same message (and one-click unsubscribe link) as the /send route.
        payload: campaignMessage(config, org, id, { subject: campaign.subject, text: campaign.text }, r) as unknown,
        concurrencyKey: mailConcurrencyKey(config),
        maxAttempts: 5,
      }));
    } catch (error) {
      if (error instanceof MailPayloadError) throw invalid("The campaign cannot be sent as given.", [{ field: error.field ?? "body", message: error.message }]);
      throw error;
    }
    const sent = await sendCampaignBatch(db, org, id, items);
    return reply.code(202).send({ campaign: id, batchId: sent.batchId, jobIds: sent.jobIds, status: `/orgs/${org}/campaigns/${id}/batch` });
  });

  typed.get("/orgs/:org/campaigns/:id/batch", { schema: { params: CampaignParams } }, async (request) => {
    const send = await campaignSend(db, request.params.org, request.params.id);
    if (!send) throw notFound("No such campaign batch.");
    return send;
  });
}
