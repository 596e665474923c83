import { enqueue, schedule, statusCounts, type JobContext, type JobsDatabase, type TaskName } from "@forge/jobs";
import { MAIL_JOB_TASK, messageToPayload } from "@forge/mail";
import type { AppConfig } from "./config.js";
import { QUEUES } from "./queues.js";
import { mailConcurrencyKey } from "./mail-limits.js";

/** An org's daily digest: what its jobs did. Payload: the org. */
export const DIGEST_TASK = "sample.daily-digest" as TaskName<{ org: string }>;
/** Every day at 08:00 in DIGEST_TIMEZONE (default UTC), one run per day whatever the number of workers. */
export const DIGEST_CRON = "0 8 * * *";

/**
 * Declares the org's digest schedule: kept in the database, so every worker's scheduler sees it
 * and each day's run is enqueued once. Idempotent: the same definition changes nothing, so the
 * web process declares it on each campaign an org sends.
 */
export async function scheduleDigest(jobs: JobsDatabase, org: string, config: Pick<AppConfig, "digestTimezone">): Promise<void> {
  await schedule(`digest:${org}`, DIGEST_CRON, {
    task: DIGEST_TASK,
    payload: { org },
    tenant: org,
    queue: QUEUES.mails,
    timezone: config.digestTimezone,
    db: jobs,
  });
}

/**
 * The digest job: counts the org's jobs (the tenant-scoped read) and mails them to MAIL_FROM,
 * as a mail job of its own (so the provider's limits apply). `ctx.scheduledAt` is the day it
 * reports on, even when it runs late.
 */
export function digestHandler(jobs: JobsDatabase, config: Pick<AppConfig, "mailFrom" | "mailProvider">) {
  return async (payload: { org: string }, ctx: JobContext) => {
    const day = (ctx.scheduledAt ?? new Date()).toISOString().slice(0, 10);
    const queues = await statusCounts({ db: jobs, tenant: payload.org });
    const lines = queues.map((q) => `${q.queue}: ${q.counts.done} done, ${q.counts.failed} failed, ${q.counts.pending} pending`);
    const mailId = await enqueue(
      MAIL_JOB_TASK,
      messageToPayload({
        from: config.mailFrom,
        to: [{ name: "", address: addressOf(config.mailFrom) }],
        subject: `Daily digest for ${payload.org}, ${day}`,
        text: lines.length > 0 ? lines.join("\n") : "No jobs yet.",
      }),
      { queue: QUEUES.mails, tenant: payload.org, concurrencyKey: mailConcurrencyKey(config), maxAttempts: 5, db: jobs },
    );
    return { day, mailId, queues: lines.length };
  };
}

/** The address inside `Name <address>`, or the text itself. */
function addressOf(from: string): string {
  return /<([^>]+)>/.exec(from)?.[1] ?? from;
}
