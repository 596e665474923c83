import { drain, getJob } from "@forge/jobs";
import { MAIL_JOB_TASK } from "@forge/mail";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHandlers, QUEUES } from "../src/handlers.js";
import { notificationHooks, recordNotification, type NotificationHooks } from "../src/notifications.js";
import { backendNames, createEnv, startApp, startSmtp, type Env } from "./support.js";

const names = await backendNames();

describe.each(names)("in-app notifications doubled by email (%s)", (name) => {
  let env: Env;
  let hooks: NotificationHooks;
  const notifications = async (org: string): Promise<number> => {
    const table = env.db.jobs.schema ? `"${env.db.jobs.schema}"."notifications"` : `"notifications"`;
    const { rows } = await env.db.sql.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${table} WHERE org = $1`, [org]);
    return Number(rows[0]!.n);
  };
  const mailJobs = (org: string) => env.count("task = $1 AND tenant = $2", [MAIL_JOB_TASK, org]);
  const input = (org: string) => ({ org, email: "ada@example.org", title: "Invoice paid", body: "Invoice 42 was paid." });

  beforeAll(async () => {
    env = await createEnv(name);
    hooks = notificationHooks(env.config);
  });
  afterAll(async () => {
    await env?.close();
  });

  it("the caller's transaction rolls back: neither the notification nor its mail job exists", async () => {
    await expect(
      env.db.transaction(async (sql, jobs) => {
        await recordNotification(env.db, hooks, input("rollback"), { sql, jobs });
        // Inside the transaction, both are there…
        expect(await notifications("rollback")).toBe(name === "sqlite" ? 1 : 0);
        throw new Error("the caller's next step failed");
      }),
    ).rejects.toThrow("the caller's next step failed");
    // …and after the rollback, neither.
    expect(await notifications("rollback")).toBe(0);
    expect(await mailJobs("rollback")).toBe(0);
  });

  it("a hook that fails after the enqueue takes the notification and the job down with it", async () => {
    const failing: NotificationHooks = {
      notificationCreated: [
        ...hooks.notificationCreated,
        async () => {
          throw new Error("push service refused");
        },
      ],
    };
    await expect(recordNotification(env.db, failing, input("hook-fails"))).rejects.toThrow("push service refused");
    expect(await notifications("hook-fails")).toBe(0);
    expect(await mailJobs("hook-fails")).toBe(0);
  });

  it("the commit publishes both, and the worker sends the mail", async () => {
    const notification = await env.db.transaction(async (sql, jobs) => recordNotification(env.db, hooks, input("commit"), { sql, jobs }));
    expect(await notifications("commit")).toBe(1);
    expect(await mailJobs("commit")).toBe(1);
    const { rows } = await env.db.sql.query<{ id: number | string }>(`SELECT id FROM ${env.db.jobs.table} WHERE task = $1 AND tenant = $2`, [
      MAIL_JOB_TASK,
      "commit",
    ]);
    const job = await getJob(Number(rows[0]!.id), { db: env.db.jobs });
    expect(job).toMatchObject({ queue: QUEUES.mails, status: "pending", payload: { subject: "Invoice paid", to: [{ address: "ada@example.org" }] } });
    expect(notification.id).toBeGreaterThan(0);

    const smtp = await startSmtp();
    try {
      await drain(createHandlers({ ...env.config, smtpUrl: smtp.url }, env.db), { queue: QUEUES.mails, db: env.db.jobs });
      expect(smtp.messages.map((m) => [m.to, m.subject])).toEqual([[["ada@example.org"], "Invoice paid"]]);
    } finally {
      await smtp.close();
    }
  });

  it("POST /orgs/:org/notifications records it with its mail job; GET lists it; bad input writes nothing", async () => {
    const server = await startApp(env);
    try {
      const post = (body: unknown) =>
        fetch(`${server.url}/orgs/route/notifications`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const { org: _org, ...body } = input("route");
      const created = await post(body);
      expect(created.status).toBe(201);
      expect(await created.json()).toMatchObject({ org: "route", email: "ada@example.org", title: "Invoice paid" });
      expect(await mailJobs("route")).toBe(1);

      const bad = await post({ email: "ada@", title: "a\nb", body: "" });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { errors: { field: string }[] }).errors.map((e) => e.field)).toEqual(["email", "title", "body"]);
      expect(await notifications("route")).toBe(1);
      expect(await mailJobs("route")).toBe(1);

      const listed = (await (await fetch(`${server.url}/orgs/route/notifications?email=ada@example.org`)).json()) as { notifications: unknown[] };
      expect(listed.notifications).toHaveLength(1);
    } finally {
      await server.close();
    }
  });
});
