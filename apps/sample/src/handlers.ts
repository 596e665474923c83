import { mkdir } from "node:fs/promises";
import path from "node:path";
import { handler, type JobContext } from "@forge/jobs";
import { createExportHandler, createImportHandler, EXPORT_JOB_TASK, IMPORT_JOB_TASK, ImportError } from "@forge/import-export";
import { createMailHandler, MAIL_JOB_TASK, type MailHandler } from "@forge/mail";
import { loadConfig, type AppConfig } from "./config.js";
import { CONTACTS_EXPORTER, CONTACTS_IMPORTER, contactsExporter, contactsImporter } from "./contacts.js";
import { openDatabase, type AppDatabase } from "./db.js";
import { DIGEST_TASK, digestHandler } from "./digest.js";
import { suppressionList } from "./suppression.js";
import { CAMPAIGN_SENT_TASK, flowHandlers, IMPORT_REPORT_TASK } from "./flows.js";
import { ONBOARDING_TASK, onboardingHandlers } from "./onboarding.js";

// Its own module so that the modules handlers.ts imports (digest.ts, flows.ts, notifications.ts)
// name the queues without importing handlers.ts back.
export { QUEUES } from "./queues.js";

export const uploadsDir = (config: Pick<AppConfig, "dataDir">): string => path.join(config.dataDir, "uploads");
export const exportsDir = (config: Pick<AppConfig, "dataDir">): string => path.join(config.dataDir, "exports");

/**
 * The worker's mail transport: SMTP_URL, pooled when SMTP_POOL_CONNECTIONS is set. The pool
 * options go in the URL because nodemailer drops any option given next to a `url`.
 */
export function mailTransport(config: Pick<AppConfig, "smtpUrl" | "smtpPoolConnections">): string | undefined {
  if (!config.smtpUrl || !config.smtpPoolConnections) return config.smtpUrl;
  const url = new URL(config.smtpUrl);
  url.searchParams.set("pool", "true");
  url.searchParams.set("maxConnections", String(config.smtpPoolConnections));
  return url.toString();
}

/**
 * The worker's mail handler. Suppressed recipients (bounced, complained, unsubscribed from bulk
 * mail) are skipped and reported. The worker keeps it to close() a pool's connections at the end.
 */
export function mailHandler(config: Pick<AppConfig, "smtpUrl" | "smtpPoolConnections">, db: AppDatabase): MailHandler {
  if (!config.smtpUrl) throw new Error("SMTP_URL is not set: the worker needs it to send mail (e.g. smtp://user:pass@smtp.example.org:587)");
  return createMailHandler({ transport: mailTransport(config), suppression: suppressionList(db) });
}

/** A job's org: every import and export job is enqueued with one; without it, refuse (no retry helps). */
function orgOf(ctx: JobContext): string {
  const org = ctx.job.tenant;
  if (!org) throw new ImportError(`job ${ctx.job.id} has no tenant: the sample app enqueues every import and export for an org`, { retryable: false });
  return org;
}

/**
 * The worker side: task name → handler. The opt-in packages know nothing of the queue or of
 * each other; this object is where they meet.
 *
 * Import and export handlers are built per job, for the job's org (its tenant, set by the
 * request that enqueued it): the contacts land in that org, and the files are read and written
 * under that org's folder only — a payload can never reach another org's upload.
 */
export function createHandlers(
  config: Pick<
    AppConfig,
    "dataDir" | "smtpUrl" | "smtpPoolConnections" | "mailFrom" | "mailProvider" | "onboardingSleepSeconds" | "onboardingActivationTimeoutSeconds"
  >,
  db: AppDatabase,
  mail: MailHandler = mailHandler(config, db),
) {
  return {
    [MAIL_JOB_TASK]: mail,

    ...handler(DIGEST_TASK, digestHandler(db.jobs, config)),

    // An import's report to the org's admins, a campaign batch's callback (src/flows.ts).
    ...flowHandlers(db, config),

    // A user's welcome, pause, wait for activation, then thanks or reminder (src/onboarding.ts).
    ...onboardingHandlers(db, config),

    [IMPORT_JOB_TASK]: (payload: unknown, ctx: JobContext) => {
      const org = orgOf(ctx);
      return createImportHandler({
        importers: { [CONTACTS_IMPORTER]: contactsImporter(db, org) },
        baseDir: path.join(uploadsDir(config), org),
      })(payload, ctx);
    },

    [EXPORT_JOB_TASK]: async (payload: unknown, ctx: JobContext) => {
      const org = orgOf(ctx);
      const baseDir = path.join(exportsDir(config), org);
      await mkdir(baseDir, { recursive: true });
      return createExportHandler({ exporters: { [CONTACTS_EXPORTER]: contactsExporter(db, org) }, baseDir })(payload, ctx);
    },
  };
}

/** Every task createHandlers serves (a test keeps the two in step). */
export const TASKS = [MAIL_JOB_TASK, DIGEST_TASK, IMPORT_JOB_TASK, EXPORT_JOB_TASK, IMPORT_REPORT_TASK, CAMPAIGN_SENT_TASK, ONBOARDING_TASK] as const;

type AnyHandler = (payload: unknown, ctx: JobContext) => Promise<unknown>;
let fromEnvironment: Record<string, AnyHandler> | undefined;

/**
 * For the `forge-jobs` CLI, from this folder: `pnpm jobs doctor --handlers src/handlers.ts`
 * checks that every queued task and schedule has a handler here. The same handlers, built from
 * the app's configuration on their first job only: importing this module opens nothing.
 * (The app's worker is src/worker.ts, which also migrates and declares the mail limits.)
 */
export default Object.fromEntries(
  TASKS.map((task) => [
    task,
    (payload: unknown, ctx: JobContext) => {
      if (!fromEnvironment) {
        const config = loadConfig();
        fromEnvironment = createHandlers(config, openDatabase(config)) as unknown as Record<string, AnyHandler>;
      }
      return fromEnvironment[task]!(payload, ctx);
    },
  ]),
) as Record<(typeof TASKS)[number], AnyHandler>;
