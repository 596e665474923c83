import { listLimits, setLimit, type JobsDatabase, type LimitSettings, type LimitStatus } from "@forge/jobs";
import type { AppConfig } from "./config.js";

/**
 * The concurrency key of every mail job: the provider's limits (a few connections, so many
 * messages a second per account) apply to all the mail the app sends through it, whichever
 * org it is for. Fairness between orgs is the job's tenant, not this key.
 */
export function mailConcurrencyKey(config: Pick<AppConfig, "mailProvider">): string {
  return `smtp:${config.mailProvider}`;
}

function describeLimit(limit: { concurrency: number | null; rate: { limit: number; perSeconds: number } | null }): string {
  const parts = [limit.concurrency === null ? "no concurrency limit" : `${limit.concurrency} at once`];
  parts.push(limit.rate ? `${limit.rate.limit} per ${limit.rate.perSeconds} s` : "no rate");
  return parts.join(", ");
}

function sameLimit(stored: LimitStatus, wanted: LimitSettings): boolean {
  const rate = wanted.rate;
  return (
    stored.concurrency === (wanted.concurrency ?? null) &&
    (rate
      ? stored.rate !== null && stored.rate.limit === rate.limit && stored.rate.perSeconds === rate.perSeconds && stored.rate.burst === rate.limit
      : stored.rate === null)
  );
}

/**
 * Declares the mail provider's limits from the configuration (SMTP_CONCURRENCY, SMTP_RATE_LIMIT,
 * SMTP_RATE_PER_SECONDS) in the database, where every worker process reads them. Run by each
 * worker at start-up: idempotent, so several workers starting together store the same row.
 * The configuration wins: a limit an operator changed at run time (`forge-jobs limits set`)
 * is put back at the next worker start — the returned line says so, for the log.
 */
export async function declareMailLimits(db: JobsDatabase, config: Pick<AppConfig, "mailProvider" | "smtpLimit">): Promise<string> {
  const key = mailConcurrencyKey(config);
  const wanted: LimitSettings = { concurrency: config.smtpLimit.concurrency, ...(config.smtpLimit.rate ? { rate: config.smtpLimit.rate } : {}) };
  const stored = (await listLimits({ db })).find((limit) => limit.key === key);
  const description = describeLimit({ concurrency: config.smtpLimit.concurrency, rate: config.smtpLimit.rate });
  if (stored && sameLimit(stored, wanted)) return `mail limit ${key}: ${description}`;
  await setLimit(key, wanted, { db });
  return stored
    ? `mail limit ${key}: ${description} (replaces ${describeLimit(stored)}, set at run time; change SMTP_CONCURRENCY / SMTP_RATE_LIMIT to keep it)`
    : `mail limit ${key}: ${description} (declared)`;
}
