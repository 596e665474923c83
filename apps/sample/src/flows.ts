import { enqueue, enqueueBatch, enqueueMany, type JobContext, type JobsDatabase, type TaskName } from "@forge/jobs";
import { MAIL_JOB_TASK, messageToPayload } from "@forge/mail";
import type { AppConfig } from "./config.js";
import type { AppDatabase, Sql } from "./db.js";
import { mailConcurrencyKey } from "./mail-limits.js";
import { QUEUES } from "./queues.js";

/**
 * Jobs that wait for other jobs (@forge/jobs dependencies and batches), wired here:
 * - an import's report: a job that depends on the import job with onDependencyFailure "run",
 *   so it runs when the import ends, done or failed, and mails the org's admins what happened;
 * - a campaign sent as a batch: the batch's callback marks the campaign sent with its counts.
 * The mail goes through @forge/mail's task, as every mail of the app; the packages still know
 * nothing of each other.
 */

export const IMPORT_REPORT_TASK = "sample.import-report" as TaskName<{ importId: string }>;
export const CAMPAIGN_SENT_TASK = "sample.campaign-sent" as TaskName<{ org: string; campaign: string }>;

/** Quoted, schema-qualified like the app's own tables. */
function table(db: AppDatabase, name: string): string {
  return db.jobs.schema ? `"${db.jobs.schema}"."${name}"` : `"${name}"`;
}

/** The tables this module keeps beside the app's own (see migrate.ts's migrateApp). */
export function flowTables(db: AppDatabase, dialect: "postgres" | "sqlite"): string[] {
  const text = dialect === "postgres" ? "text" : "TEXT";
  const big = dialect === "postgres" ? "bigint" : "INTEGER";
  return [
    `CREATE TABLE IF NOT EXISTS ${table(db, "org_admins")} (org ${text} NOT NULL, email ${text} NOT NULL, PRIMARY KEY (org, email))`,
    `CREATE TABLE IF NOT EXISTS ${table(db, "campaign_sends")} (
      org ${text} NOT NULL, campaign ${text} NOT NULL, batch_id ${big} NOT NULL, job_ids ${text} NOT NULL,
      sent_at ${text}, done integer, failed integer, cancelled integer, failed_ids ${text},
      PRIMARY KEY (org, campaign)
    )`,
  ];
}

/** Enqueues the report of an import, inside the transaction that enqueued the import job (`jobs` is bound to it). */
export function enqueueImportReport(jobs: JobsDatabase, org: string, importId: string, importJobId: number): Promise<number> {
  return enqueue(IMPORT_REPORT_TASK, { importId }, { db: jobs, tenant: org, queue: QUEUES.imports, dependsOn: [importJobId], onDependencyFailure: "run" });
}

/** The org's admins, who receive its import reports. */
export async function setOrgAdmins(db: AppDatabase, org: string, emails: string[]): Promise<void> {
  await db.transaction(async (sql) => {
    await sql.query(`DELETE FROM ${table(db, "org_admins")} WHERE org = $1`, [org]);
    for (const email of emails) await sql.query(`INSERT INTO ${table(db, "org_admins")} (org, email) VALUES ($1, $2)`, [org, email]);
  });
}

interface ImportReport {
  read: number;
  imported: number;
  rejected: number;
}

/**
 * The report job: reads how its import ended (ctx.dependencies()), then enqueues one mail per
 * admin of the org. Idempotency keys per (report, admin): a retried report sends nothing twice.
 */
export function importReportHandler(db: AppDatabase, config: Pick<AppConfig, "mailFrom" | "mailProvider">) {
  return async (payload: { importId: string }, ctx: JobContext) => {
    const org = ctx.job.tenant as string;
    const [imported] = await ctx.dependencies<ImportReport>();
    if (!imported) throw Object.assign(new Error(`import report ${ctx.job.id} has no import to report on`), { retryable: false });
    const result = imported.result;
    const subject =
      imported.status === "done"
        ? `Import ${payload.importId}: ${result?.imported ?? 0} imported, ${result?.rejected ?? 0} rejected`
        : `Import ${payload.importId} did not complete (${imported.status})`;
    const text =
      imported.status === "done"
        ? `${result?.read ?? 0} rows read, ${result?.imported ?? 0} imported, ${result?.rejected ?? 0} rejected (job ${imported.id}).`
        : `The import job ${imported.id} ended ${imported.status}; nothing more will be imported from this file.`;
    const admins = (await db.sql.query<{ email: string }>(`SELECT email FROM ${table(db, "org_admins")} WHERE org = $1 ORDER BY email`, [org])).rows;
    if (admins.length === 0) return { status: imported.status, mailed: 0 };
    await enqueueMany(
      admins.map((a) => ({
        task: MAIL_JOB_TASK,
        payload: messageToPayload({ from: config.mailFrom, to: [{ name: "", address: a.email }], subject, text }),
        tenant: org,
        concurrencyKey: mailConcurrencyKey(config),
        maxAttempts: 5,
        idempotencyKey: `import-report:${ctx.job.id}:${a.email}`,
      })),
      { queue: QUEUES.mails, db: db.jobs },
    );
    return { status: imported.status, mailed: admins.length };
  };
}

/**
 * Sends a campaign as one batch, its callback marking it sent. One transaction: the campaign
 * row (its primary key makes a second send return the first one's jobs) and the batch.
 */
export async function sendCampaignBatch(
  db: AppDatabase,
  org: string,
  campaign: string,
  items: { task: string; payload: unknown; concurrencyKey: string; maxAttempts: number }[],
): Promise<{ batchId: number; jobIds: number[]; repeated: boolean }> {
  return db.transaction(async (sql, jobs) => {
    const existing = await readSend(sql, db, org, campaign);
    if (existing) return { batchId: existing.batchId, jobIds: existing.jobIds, repeated: true };
    const { batchId, ids } = await enqueueBatch(items, {
      db: jobs,
      tenant: org,
      queue: QUEUES.mails,
      onComplete: { task: CAMPAIGN_SENT_TASK, payload: { org, campaign } },
    });
    await sql.query(`INSERT INTO ${table(db, "campaign_sends")} (org, campaign, batch_id, job_ids) VALUES ($1, $2, $3, $4)`, [
      org,
      campaign,
      batchId,
      JSON.stringify(ids),
    ]);
    return { batchId, jobIds: ids, repeated: false };
  });
}

async function readSend(sql: Sql, db: AppDatabase, org: string, campaign: string) {
  const { rows } = await sql.query<{
    batch_id: number | string;
    job_ids: string;
    sent_at: string | null;
    done: number | null;
    failed: number | null;
    cancelled: number | null;
    failed_ids: string | null;
  }>(`SELECT batch_id, job_ids, sent_at, done, failed, cancelled, failed_ids FROM ${table(db, "campaign_sends")} WHERE org = $1 AND campaign = $2`, [
    org,
    campaign,
  ]);
  const row = rows[0];
  if (!row) return null;
  return {
    batchId: Number(row.batch_id),
    jobIds: JSON.parse(row.job_ids) as number[],
    sentAt: row.sent_at,
    counts:
      row.sent_at === null
        ? null
        : { done: Number(row.done), failed: Number(row.failed), cancelled: Number(row.cancelled), failedIds: JSON.parse(row.failed_ids ?? "[]") as number[] },
  };
}

/** A campaign's send, as GET /orgs/:org/campaigns/:id/batch shows it. */
export function campaignSend(db: AppDatabase, org: string, campaign: string) {
  return readSend(db.sql, db, org, campaign);
}

/** The batch's callback: every mail of the campaign has ended; record when and how. */
export function campaignSentHandler(db: AppDatabase) {
  return async (payload: { org: string; campaign: string }, ctx: JobContext) => {
    const batch = await ctx.batch();
    if (!batch) throw Object.assign(new Error(`job ${ctx.job.id} is not a batch callback`), { retryable: false });
    await db.sql.query(
      `UPDATE ${table(db, "campaign_sends")} SET sent_at = $3, done = $4, failed = $5, cancelled = $6, failed_ids = $7 WHERE org = $1 AND campaign = $2`,
      [payload.org, payload.campaign, new Date().toISOString(), batch.done, batch.failed, batch.cancelled, JSON.stringify(batch.failedIds)],
    );
    return batch;
  };
}

/** The worker side of this module, spread into handlers.ts's object. */
export function flowHandlers(db: AppDatabase, config: Pick<AppConfig, "mailFrom" | "mailProvider">) {
  return { [IMPORT_REPORT_TASK]: importReportHandler(db, config), [CAMPAIGN_SENT_TASK]: campaignSentHandler(db) };
}
