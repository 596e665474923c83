import { getJob } from "@forge/jobs";
import { MAIL_JOB_TASK, MailPayloadError, previewMail, type MailPreview } from "@forge/mail";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance, FastifyReply } from "fastify";
import { campaignMessage } from "../campaign-message.js";
import type { AppConfig } from "../config.js";
import type { AppDatabase } from "../db.js";
import { invalid, notFound, Problems } from "../problems.js";
import { CampaignBody, CampaignParams, JobParams } from "../schemas.js";
import { checkCampaign } from "./campaigns.js";

type Format = "html" | "eml";

function formatOf(query: { format?: string }, problems: Problems): Format {
  const format = query.format ?? "html";
  if (format !== "html" && format !== "eml") problems.add("format", "must be html or eml");
  return format as Format;
}

function send(reply: FastifyReply, preview: MailPreview, format: Format, name: string): FastifyReply {
  reply.header("cache-control", "no-store");
  if (format === "eml") return reply.type("message/rfc822").header("content-disposition", `attachment; filename="${name}.eml"`).send(preview.eml);
  // The mail's HTML sits in a sandboxed iframe; the page itself runs no script either.
  return reply
    .type("text/html; charset=utf-8")
    .header("content-security-policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'")
    .send(preview.html);
}

/**
 * Look at a mail before it goes: `?format=html` (default, a page to read) or `?format=eml`
 * (the message as the SMTP server would get it, to open in a mail client).
 *
 * - POST /orgs/:org/campaigns/:id/preview — the body of a campaign send; renders the mail of its
 *   first recipient, unsubscribe link included, and enqueues nothing.
 * - GET /orgs/:org/jobs/:id/mail-preview — a mail job already queued (or sent), of this org only.
 */
export function mailPreviewRoutes(app: FastifyInstance, db: AppDatabase, config: Pick<AppConfig, "mailFrom" | "publicUrl" | "unsubscribeSecret">): void {
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  typed.post("/orgs/:org/campaigns/:id/preview", { schema: { params: CampaignParams, body: CampaignBody } }, async (request, reply) => {
    const { org, id } = request.params;
    const problems = new Problems();
    const format = formatOf(request.query as { format?: string }, problems);
    problems.check("The campaign cannot be previewed as given.");
    checkCampaign(request.body);
    const campaign = request.body;
    let preview: MailPreview;
    try {
      preview = await previewMail(campaignMessage(config, org, id, campaign, campaign.recipients[0]!));
    } catch (error) {
      if (error instanceof MailPayloadError) throw invalid("The campaign cannot be previewed as given.", [{ field: error.field, message: error.message }]);
      throw error;
    }
    return send(reply, preview, format, `campaign-${id}`);
  });

  typed.get("/orgs/:org/jobs/:id/mail-preview", { schema: { params: JobParams } }, async (request, reply) => {
    const { org, id } = request.params;
    const problems = new Problems();
    const format = formatOf(request.query as { format?: string }, problems);
    problems.check("No mail job can have this address.");
    const job = await getJob(Number(id), { db: db.jobs, tenant: org });
    if (!job || job.task !== MAIL_JOB_TASK) throw notFound("No such mail job in this organization.");
    return send(reply, await previewMail(job.payload, { defaults: { from: config.mailFrom } }), format, `job-${id}`);
  });
}
