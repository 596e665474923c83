import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseEnv } from "node:util";

/** apps/sample: relative paths in the configuration are resolved against it, whatever the cwd. */
export const APP_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export interface AppConfig {
  /** `sqlite:<file>` (default `sqlite:data/sample.db`) or `postgres://…`: the queue and the app's tables live together. */
  databaseUrl: string;
  /** PostgreSQL schema for the queue and the app's tables; undefined = the connection's default. */
  databaseSchema: string | undefined;
  /** Uploads (`uploads/<org>/<uuid>.csv`) and exports (`exports/<org>/…`) go here. */
  dataDir: string;
  /** Where the worker sends mail (`smtp://user:pass@host:587`); the web process does not need it. */
  smtpUrl: string | undefined;
  /**
   * SMTP connections the worker keeps open and reuses (`SMTP_POOL_CONNECTIONS`, nodemailer's
   * `pool` with `maxConnections`); 0 (the default) opens one connection per message.
   */
  smtpPoolConnections?: number | undefined;
  /** The `From` of campaign mails. */
  mailFrom: string;
  /**
   * The mail provider's name (`MAIL_PROVIDER`, default `default`): mail jobs carry the
   * concurrency key `smtp:<provider>`. The web process (which sets the key) and the worker
   * (which declares its limit) must agree on it, so it is a name, not derived from SMTP_URL.
   */
  mailProvider: string;
  /** The time zone of each org's daily digest (08:00 there); an IANA name. */
  digestTimezone: string;
  /** The provider's limits, declared by the worker at start-up (see src/mail-limits.ts). */
  smtpLimit: {
    /** Mails in flight at once, across every worker (`SMTP_CONCURRENCY`, default 5). */
    concurrency: number;
    /** `SMTP_RATE_LIMIT` mails per `SMTP_RATE_PER_SECONDS` (default 14 per 1 s); null when `SMTP_RATE_LIMIT=0`. */
    rate: { limit: number; perSeconds: number } | null;
  };
  /** Guards /admin/jobs; unset = the dashboard is disabled (404). */
  adminToken: string | undefined;
  port: number;
  host: string;
  /** Where the worker serves `/metrics` for Prometheus (`METRICS_PORT`, on HOST); unset = no endpoint. The web process serves its own on PORT. */
  metricsPort?: number | undefined;
  /** How long the onboarding job sleeps after the welcome mail (`ONBOARDING_SLEEP_SECONDS`, default 3 days); see src/onboarding.ts. */
  onboardingSleepSeconds?: number | undefined;
  /** How long it then waits for the user's activation before the reminder (`ONBOARDING_ACTIVATION_TIMEOUT_SECONDS`, default 7 days). */
  onboardingActivationTimeoutSeconds?: number | undefined;
  /**
   * Seconds between a running job's progress writes and between the reads of the import page's
   * events stream (`PROGRESS_INTERVAL_SECONDS`, default 0.5): the worker and the web process read it alike.
   */
  progressInterval?: number | undefined;
  /** Largest CSV upload, in bytes (413 above). */
  maxUploadBytes: number;
  /** The app's public base URL (`PUBLIC_URL`, https), for links in mail such as one-click unsubscribe. */
  publicUrl?: string | undefined;
  /** The HMAC key of unsubscribe tokens (`UNSUBSCRIBE_SECRET`, 32+ characters); unset = no unsubscribe links. */
  unsubscribeSecret?: string | undefined;
  /** The bearer token of `POST /bounces` (`BOUNCE_TOKEN`, 32+ characters), which the inbound mail server presents; unset = no route. */
  bounceToken?: string | undefined;
  /** The SNS topic of Amazon SES's bounce and complaint notifications (`SES_TOPIC_ARN`); unset = no `POST /webhooks/ses`. */
  sesTopicArn?: string | undefined;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max)
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return value;
}

function positiveNumber(env: NodeJS.ProcessEnv, name: string, fallback: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0 || value > max)
    throw new ConfigError(`${name} must be a number above 0 and at most ${max}, got ${JSON.stringify(raw)}`);
  return value;
}

/** Becomes part of a concurrency key, of a log line and of a CLI argument: kept plain. */
const PROVIDER = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** `sqlite:data/x.db` is relative to apps/sample, so `pnpm start` and `pnpm worker` find the same file from any directory. */
function resolveDatabaseUrl(url: string): string {
  const match = /^sqlite:(?!:memory:)(?!\/)(.+)$/i.exec(url);
  return match ? `sqlite:${path.resolve(APP_DIR, match[1]!)}` : url;
}

/**
 * The environment, over the app's `.env` file (committed: the defaults, no secrets). The
 * `forge-jobs` CLI run from this folder reads `DATABASE_URL` from the same file, so the app, its
 * worker and the operator's commands open one database.
 */
export function appEnvironment(env: NodeJS.ProcessEnv = process.env, file = path.join(APP_DIR, ".env")): NodeJS.ProcessEnv {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return env;
  }
  return { ...parseEnv(text), ...env };
}

/** The configuration from the environment (by default with the app's `.env`); throws ConfigError with a message naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = appEnvironment()): AppConfig {
  const dataDir = path.resolve(APP_DIR, env.DATA_DIR || "data");
  const schema = env.DATABASE_SCHEMA || undefined;
  if (schema !== undefined && !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) {
    throw new ConfigError(`DATABASE_SCHEMA must be letters, digits and underscores, got ${JSON.stringify(schema)}`);
  }
  const mailProvider = env.MAIL_PROVIDER || "default";
  if (!PROVIDER.test(mailProvider)) {
    throw new ConfigError(`MAIL_PROVIDER must be 1–63 lowercase letters, digits, '.', '-' or '_' (e.g. ses), got ${JSON.stringify(mailProvider)}`);
  }
  const rateLimit = positiveInt(env, "SMTP_RATE_LIMIT", 14, 0, 1_000_000);
  return {
    databaseUrl: resolveDatabaseUrl(env.DATABASE_URL || `sqlite:${path.join(dataDir, "sample.db")}`),
    databaseSchema: schema,
    dataDir,
    smtpUrl: env.SMTP_URL || undefined,
    smtpPoolConnections: positiveInt(env, "SMTP_POOL_CONNECTIONS", 0, 0, 100),
    mailFrom: env.MAIL_FROM || "Forge sample <noreply@sample.invalid>",
    mailProvider,
    digestTimezone: timeZone(env.DIGEST_TIMEZONE || "UTC"),
    smtpLimit: {
      concurrency: positiveInt(env, "SMTP_CONCURRENCY", 5, 1, 10_000),
      rate: rateLimit === 0 ? null : { limit: rateLimit, perSeconds: positiveNumber(env, "SMTP_RATE_PER_SECONDS", 1, 86_400) },
    },
    adminToken: env.ADMIN_TOKEN || undefined,
    port: positiveInt(env, "PORT", 3000, 0, 65535),
    host: env.HOST || "127.0.0.1",
    metricsPort: env.METRICS_PORT ? positiveInt(env, "METRICS_PORT", 0, 1, 65535) : undefined,
    progressInterval: positiveNumber(env, "PROGRESS_INTERVAL_SECONDS", 0.5, 60),
    maxUploadBytes: positiveInt(env, "MAX_UPLOAD_BYTES", 10 * 1024 * 1024, 1, 1024 * 1024 * 1024),
    // The queue's limit for a sleep and for an event wait's timeout: 366 days.
    onboardingSleepSeconds: positiveInt(env, "ONBOARDING_SLEEP_SECONDS", 3 * 86_400, 0, 366 * 86_400),
    onboardingActivationTimeoutSeconds: positiveInt(env, "ONBOARDING_ACTIVATION_TIMEOUT_SECONDS", 7 * 86_400, 1, 366 * 86_400),
    ...unsubscribeSettings(env),
    ...bounceSettings(env),
  };
}

/** Both routes write to the suppression list, so each needs proof of who is posting. */
function bounceSettings(env: NodeJS.ProcessEnv): Pick<AppConfig, "bounceToken" | "sesTopicArn"> {
  const bounceToken = env.BOUNCE_TOKEN || undefined;
  if (bounceToken !== undefined && bounceToken.length < 32) throw new ConfigError("BOUNCE_TOKEN must be at least 32 characters (e.g. openssl rand -hex 32)");
  const sesTopicArn = env.SES_TOPIC_ARN || undefined;
  if (sesTopicArn !== undefined && !/^arn:aws[\w-]*:sns:[\w-]+:\d{12}:[\w-]{1,256}$/.test(sesTopicArn)) {
    throw new ConfigError(`SES_TOPIC_ARN must be an SNS topic ARN such as arn:aws:sns:eu-west-1:123456789012:ses-feedback, got ${JSON.stringify(sesTopicArn)}`);
  }
  return { bounceToken, sesTopicArn };
}

/** PUBLIC_URL and UNSUBSCRIBE_SECRET: both or neither, so that campaigns never carry a link that cannot work. */
function unsubscribeSettings(env: NodeJS.ProcessEnv): Pick<AppConfig, "publicUrl" | "unsubscribeSecret"> {
  const publicUrl = env.PUBLIC_URL || undefined;
  const secret = env.UNSUBSCRIBE_SECRET || undefined;
  if (publicUrl !== undefined && !/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/.test(publicUrl)) {
    throw new ConfigError(`PUBLIC_URL must be the app's base URL, e.g. https://app.example.org, got ${JSON.stringify(publicUrl)}`);
  }
  if (secret !== undefined && secret.length < 32) throw new ConfigError("UNSUBSCRIBE_SECRET must be at least 32 characters (e.g. openssl rand -hex 32)");
  return { publicUrl, unsubscribeSecret: secret };
}

function timeZone(name: string): string {
  try {
    new Intl.DateTimeFormat("en", { timeZone: name });
    return name;
  } catch {
    throw new ConfigError(`DIGEST_TIMEZONE must be an IANA time zone such as Europe/Paris, got ${JSON.stringify(name)}`);
  }
}

/** Without a password: what logs may show of a URL. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, "//$1:***@");
}
