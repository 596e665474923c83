import { enqueue, sendEvent, type JobContext, type TaskName } from "@forge/jobs";
import { MAIL_JOB_TASK, messageToPayload } from "@forge/mail";
import type { AppConfig } from "./config.js";
import type { AppDatabase } from "./db.js";
import { mailConcurrencyKey } from "./mail-limits.js";
import { QUEUES } from "./queues.js";

/**
 * A user's onboarding, one durable job of @forge/jobs (steps, a sleep, an event wait) whose
 * mails go through @forge/mail's task as every mail of the app:
 *   signup ─ "welcome" mail ─ sleep "pause" ─ wait "activation" for `user.activated` (key: the user's id)
 *     ├ activated before the timeout → "thanks" mail
 *     └ timed out                    → "reminder" mail
 * The signup enqueues the job in the transaction that creates the user; the activation sends the
 * event in the transaction that marks the user activated. Either commits with its row or not at all.
 */

export interface OnboardingPayload {
  userId: number;
  email: string;
  name: string;
}
export const ONBOARDING_TASK = "sample.onboarding" as TaskName<OnboardingPayload>;
/** The event the activation sends; its key is the user's id, its tenant the user's org. */
export const USER_ACTIVATED = "user.activated";

export const ONBOARDING_DEFAULTS = { sleepSeconds: 3 * 86_400, activationTimeoutSeconds: 7 * 86_400 } as const;

export type OnboardingConfig = Pick<AppConfig, "mailFrom" | "mailProvider" | "onboardingSleepSeconds" | "onboardingActivationTimeoutSeconds">;

export interface User {
  id: number;
  org: string;
  email: string;
  name: string;
}

function table(db: AppDatabase): string {
  return db.jobs.schema ? `"${db.jobs.schema}"."users"` : `"users"`;
}

/** The table's DDL, run by migrateApp with the app's other tables. */
export function userTables(db: AppDatabase): string[] {
  const [id, time] =
    db.jobs.dialect === "postgres" ? ["bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "timestamptz"] : ["INTEGER PRIMARY KEY AUTOINCREMENT", "TEXT"];
  return [
    `CREATE TABLE IF NOT EXISTS ${table(db)} (
      id ${id}, org text NOT NULL, email text NOT NULL, name text NOT NULL, activated_at ${time},
      UNIQUE (org, email)
    )`,
  ];
}

/**
 * Creates the user and enqueues its onboarding in one transaction. Null when the org already
 * has a user of that address (nothing written, no second onboarding).
 */
export function signUp(db: AppDatabase, org: string, email: string, name: string): Promise<{ user: User; jobId: number } | null> {
  return db.transaction(async (sql, jobs) => {
    const { rows } = await sql.query<{ id: number | string }>(
      `INSERT INTO ${table(db)} (org, email, name) VALUES ($1, $2, $3) ON CONFLICT (org, email) DO NOTHING RETURNING id`,
      [org, email, name],
    );
    if (!rows[0]) return null;
    const user = { id: Number(rows[0].id), org, email, name };
    const jobId = await enqueue(ONBOARDING_TASK, { userId: user.id, email, name }, { db: jobs, tenant: org, queue: QUEUES.mails });
    return { user, jobId };
  });
}

/**
 * Marks the user activated and sends `user.activated` in the same transaction: the onboarding
 * job waiting for it wakes when this commits (and not if it rolls back). `woken` is how many
 * jobs it woke: 0 when the job is not waiting yet (it still gets the event when it reaches the
 * wait, see the README) or already ended. Null for an unknown user; a second activation sends nothing.
 */
export function activateUser(db: AppDatabase, org: string, id: number): Promise<{ id: number; woken: number } | null> {
  return db.transaction(async (sql, jobs) => {
    const activatedAt = new Date().toISOString();
    const updated = await sql.query(`UPDATE ${table(db)} SET activated_at = $3 WHERE org = $1 AND id = $2 AND activated_at IS NULL RETURNING id`, [
      org,
      id,
      activatedAt,
    ]);
    if (updated.rows.length === 0) {
      const exists = await sql.query(`SELECT id FROM ${table(db)} WHERE org = $1 AND id = $2`, [org, id]);
      return exists.rows.length === 0 ? null : { id, woken: 0 };
    }
    const woken = await sendEvent(USER_ACTIVATED, { activatedAt }, { key: String(id), tenant: org, db: jobs });
    return { id, woken };
  });
}

/** One mail job, enqueued on the step's transaction: the mail and the step's saved result commit together. */
function mailStep(db: AppDatabase, config: OnboardingConfig, ctx: JobContext, payload: OnboardingPayload, subject: string, text: string) {
  return (tx: unknown) =>
    enqueue(MAIL_JOB_TASK, messageToPayload({ from: config.mailFrom, to: [{ name: payload.name, address: payload.email }], subject, text }), {
      db: db.jobs.bind(tx),
      queue: QUEUES.mails,
      tenant: ctx.job.tenant ?? undefined,
      concurrencyKey: mailConcurrencyKey(config),
      maxAttempts: 5,
    });
}

/**
 * The onboarding job. Each run replays it from the top: the steps done answer from storage, so
 * the code between them only decides from the payload and the steps' results.
 */
export function onboardingHandler(db: AppDatabase, config: OnboardingConfig) {
  const sleepSeconds = config.onboardingSleepSeconds ?? ONBOARDING_DEFAULTS.sleepSeconds;
  const timeout = config.onboardingActivationTimeoutSeconds ?? ONBOARDING_DEFAULTS.activationTimeoutSeconds;
  return async (payload: OnboardingPayload, ctx: JobContext) => {
    const mail = (subject: string, text: string) => mailStep(db, config, ctx, payload, subject, text);
    await ctx.step("welcome", mail("Welcome aboard", `Hello ${payload.name}, your account is ready. Activate it to get started.`));
    await ctx.sleep("pause", sleepSeconds);
    const activation = await ctx.waitForEvent<{ activatedAt: string }>("activation", { event: USER_ACTIVATED, key: String(payload.userId), timeout });
    if (activation === null) {
      await ctx.step("reminder", mail("Your account is waiting", `Hello ${payload.name}, you have not activated your account yet.`));
      return { activated: false };
    }
    await ctx.step("thanks", mail("Thanks for activating", `Hello ${payload.name}, your account is active since ${activation.activatedAt}.`));
    return { activated: true };
  };
}

/** The worker side of this module, spread into handlers.ts's object. */
export function onboardingHandlers(db: AppDatabase, config: OnboardingConfig) {
  return { [ONBOARDING_TASK]: onboardingHandler(db, config) };
}
