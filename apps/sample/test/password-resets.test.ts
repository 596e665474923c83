import { getJob } from "@forge/jobs";
import { MAIL_JOB_TASK } from "@forge/mail";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backendNames, createEnv, startApp, type Env } from "./support.js";

const names = await backendNames();

describe.each(names)("POST /orgs/:org/password-resets (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  const json = (route: string, body: unknown) =>
    fetch(`${server.url}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  beforeAll(async () => {
    env = await createEnv(name);
    server = await startApp(env);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
  });

  it("answers 202 with one mail job for the org under the provider's key; a second click while it is queued returns the same job", async () => {
    const response = await json("/orgs/acme/password-resets", { email: " Ada@Example.org " });
    expect(response.status).toBe(202);
    const { jobId } = (await response.json()) as { jobId: number };
    expect(await getJob(jobId, { db: env.db.jobs })).toMatchObject({
      task: MAIL_JOB_TASK,
      queue: "mails",
      tenant: "acme",
      group: "acme",
      concurrencyKey: "smtp:default",
      priority: 0,
      payload: { subject: "Reset your password", to: [{ address: "Ada@Example.org" }] },
    });
    const again = (await (await json("/orgs/acme/password-resets", { email: "ada@example.org" })).json()) as { jobId: number };
    expect(again.jobId).toBe(jobId);
  });

  it.each([
    ["no email", {}, ["email"]],
    ["an invalid email and an unknown field", { email: "bob@", next: "/x" }, ["next", "email"]],
    ["a body that is not an object", ["ada@example.org"], ["body"]],
  ])("answers 400 problem+json for %s, and enqueues nothing", async (_what, body, fields) => {
    const before = await env.count();
    const response = await json("/orgs/acme/password-resets", body);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { errors: { field: string }[] }).errors.map((e) => e.field)).toEqual(fields);
    expect(await env.count()).toBe(before);
  });
});
