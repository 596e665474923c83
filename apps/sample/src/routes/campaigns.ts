import { enqueueMany, JobError } from "@forge/jobs";
import { MAIL_JOB_TASK, MailPayloadError, messageToPayload, type MailPayload } from "@forge/mail";
import type { FastifyInstance } from "fastify";
import type { AppConfig } from "../config.js";
import { isEmail } from "../contacts.js";
import type { AppDatabase } from "../db.js";
import { scheduleDigest } from "../digest.js";
import { QUEUES } from "../handlers.js";
import { mailConcurrencyKey } from "../mail-limits.js";
import { invalid, Problems } from "../problems.js";
import { checkPath } from "./params.js";

export interface CampaignRequest {
  subject: string;
  text: string;
  recipients: { email: string; name?: string }[];
}

export const MAX_RECIPIENTS = 1000;
const LINE_BREAK = /[\r\n]/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The body, checked field by field; every problem is reported with its path. */
export function parseCampaign(body: unknown, problems: Problems): CampaignRequest | undefined {
  if (!isObject(body)) {
    problems.add("body", "must be a JSON object { subject, text, recipients: [{ email, name? }] }");
    return undefined;
  }
  const { subject, text, recipients } = body;
  for (const key of Object.keys(body))
    if (!["subject", "text", "recipients"].includes(key)) problems.add(key, "is not a known field (subject, text, recipients)");
  if (typeof subject !== "string" || subject.trim() === "") problems.add("subject", "is required (a non-empty string)");
  else if (subject.length > 200) problems.add("subject", "is longer than 200 characters");
  else if (LINE_BREAK.test(subject)) problems.add("subject", "must be one line (no CR or LF)");
  if (typeof text !== "string" || text.trim() === "") problems.add("text", "is required (a non-empty string)");
  else if (text.length > 100_000) problems.add("text", "is longer than 100000 characters");
  if (!Array.isArray(recipients) || recipients.length === 0) {
    problems.add("recipients", "is required (a non-empty array of { email, name? })");
  } else if (recipients.length > MAX_RECIPIENTS) {
    problems.add("recipients", `has ${recipients.length} entries; at most ${MAX_RECIPIENTS} per request`);
  } else {
    const seen = new Map<string, number>();
    recipients.forEach((recipient: unknown, i) => {
      const at = `recipients[${i}]`;
      if (!isObject(recipient)) return problems.add(at, "must be an object { email, name? }");
      for (const key of Object.keys(recipient)) if (key !== "email" && key !== "name") problems.add(`${at}.${key}`, "is not a known field (email, name)");
      const { email, name } = recipient;
      if (typeof email !== "string" || email.trim() === "") problems.add(`${at}.email`, "is required");
      else if (!isEmail(email.trim())) problems.add(`${at}.email`, `${JSON.stringify(email)} is not a valid email address`);
      else {
        const key = email.trim().toLowerCase();
        const first = seen.get(key);
        if (first !== undefined) problems.add(`${at}.email`, `repeats recipients[${first}].email`);
        else seen.set(key, i);
      }
      if (name !== undefined && (typeof name !== "string" || name.length > 200 || LINE_BREAK.test(name))) {
        problems.add(`${at}.name`, "must be a one-line string of at most 200 characters");
      }
    });
  }
  return problems.list.length === 0 ? (body as unknown as CampaignRequest) : undefined;
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
export function campaignRoutes(app: FastifyInstance, db: AppDatabase, config: Pick<AppConfig, "mailFrom" | "mailProvider" | "digestTimezone">): void {
  const { mailFrom } = config;
  app.post<{ Params: { org: string; id: string } }>("/orgs/:org/campaigns/:id/send", async (request, reply) => {
    const { org, id } = request.params;
    const problems = checkPath(request.params, "id");
    const campaign = parseCampaign(request.body, problems);
    problems.check("The campaign cannot be sent as given.");
    const { subject, text, recipients } = campaign!;

    let payloads: MailPayload[];
    try {
      payloads = recipients.map((r) =>
        messageToPayload({
          from: mailFrom,
          to: [{ name: r.name ?? "", address: r.email.trim() }],
          subject,
          text,
          headers: { "X-Campaign": `${org}/${id}` },
        }),
      );
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
      jobs: recipients.map((r, i) => ({ email: r.email.trim(), jobId: ids[i], status: `/orgs/${org}/jobs/${ids[i]}` })),
    });
  });
}
