import { enqueue, type JobsDatabase } from "@forge/jobs";
import { MAIL_JOB_TASK, messageToPayload } from "@forge/mail";
import type { AppConfig } from "./config.js";
import type { AppDatabase, Sql } from "./db.js";
import { mailConcurrencyKey } from "./mail-limits.js";
import { QUEUES } from "./queues.js";

/** An in-app notification: a row of the app's own `notifications` table. */
export interface Notification {
  id: number;
  org: string;
  email: string;
  title: string;
  body: string;
}

export interface NotificationInput {
  org: string;
  email: string;
  title: string;
  body: string;
}

/** The transaction a notification is written in: the app's SQL, and the queue bound to the same connection. */
export interface NotificationTx {
  sql: Sql;
  jobs: JobsDatabase;
}

/** Runs inside the transaction that writes the notification: what it writes commits or rolls back with it. */
export type NotificationCreatedHook = (notification: Notification, tx: NotificationTx) => Promise<void>;

export interface NotificationHooks {
  notificationCreated: NotificationCreatedHook[];
}

function table(db: AppDatabase): string {
  return db.jobs.schema ? `"${db.jobs.schema}"."notifications"` : `"notifications"`;
}

/** The table's DDL, run by migrateApp with the app's other tables. */
export function notificationTables(db: AppDatabase): string[] {
  if (db.jobs.dialect === "postgres") {
    return [
      `CREATE TABLE IF NOT EXISTS ${table(db)} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        org text NOT NULL,
        email text NOT NULL,
        title text NOT NULL,
        body text NOT NULL,
        read_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
    ];
  }
  return [
    `CREATE TABLE IF NOT EXISTS ${table(db)} (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      org TEXT NOT NULL,
      email TEXT NOT NULL,
      title TEXT NOT NULL,
      body TEXT NOT NULL,
      read_at TEXT,
      created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    )`,
  ];
}

/**
 * The reference page's "double a notification by email": the mail job is enqueued on the
 * notification's own transaction (`tx.jobs`), so both are published together or not at all —
 * never a mail about a notification that was rolled back, never a notification whose mail is lost.
 */
export function emailOnNotification(config: Pick<AppConfig, "mailFrom" | "mailProvider">): NotificationCreatedHook {
  return async (notification, tx) => {
    await enqueue(MAIL_JOB_TASK, messageToPayload({ from: config.mailFrom, to: notification.email, subject: notification.title, text: notification.body }), {
      db: tx.jobs,
      queue: QUEUES.mails,
      tenant: notification.org,
      concurrencyKey: mailConcurrencyKey(config),
      maxAttempts: 5,
      // One mail per notification, even if a hook runs twice for it.
      idempotencyKey: `notification:${notification.org}:${notification.id}`,
    });
  };
}

/** The app's hooks: a notification is doubled by email. Add your own (push, webhooks) the same way. */
export function notificationHooks(config: Pick<AppConfig, "mailFrom" | "mailProvider">): NotificationHooks {
  return { notificationCreated: [emailOnNotification(config)] };
}

/**
 * Records a notification and runs the `notificationCreated` hooks in the same transaction: the
 * caller's, when it passes one (then nothing is visible before the caller commits), else one of its own.
 */
export async function recordNotification(db: AppDatabase, hooks: NotificationHooks, input: NotificationInput, tx?: NotificationTx): Promise<Notification> {
  const run = async (t: NotificationTx): Promise<Notification> => {
    const { rows } = await t.sql.query<{ id: number | string }>(`INSERT INTO ${table(db)} (org, email, title, body) VALUES ($1, $2, $3, $4) RETURNING id`, [
      input.org,
      input.email,
      input.title,
      input.body,
    ]);
    const notification: Notification = { id: Number(rows[0]!.id), ...input };
    for (const hook of hooks.notificationCreated) await hook(notification, t);
    return notification;
  };
  return tx ? run(tx) : db.transaction((sql, jobs) => run({ sql, jobs }));
}

/** A page of an org's notifications for one address, newest first. */
export async function listNotifications(db: AppDatabase, org: string, email: string): Promise<Notification[]> {
  const { rows } = await db.sql.query<{ id: number | string; org: string; email: string; title: string; body: string }>(
    `SELECT id, org, email, title, body FROM ${table(db)} WHERE org = $1 AND email = $2 ORDER BY id DESC LIMIT 100`,
    [org, email],
  );
  return rows.map((row) => ({ ...row, id: Number(row.id) }));
}
