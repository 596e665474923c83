import { getJob, listSchedules, processOne, triggerSchedule } from "@forge/jobs";
import { MAIL_JOB_TASK } from "@forge/mail";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DIGEST_CRON, DIGEST_TASK, digestHandler, scheduleDigest } from "../src/digest.js";
import { backendNames, createEnv, startApp, type Env } from "./support.js";

const names = await backendNames();

describe.each(names)("each org's daily digest, a schedule (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;

  beforeAll(async () => {
    env = await createEnv(name);
    server = await startApp(env);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
  });

  it("a digest run mails the org's counts, for the day it was planned", async () => {
    await scheduleDigest(env.db.jobs, "solo", { digestTimezone: "Europe/Paris" });
    await scheduleDigest(env.db.jobs, "solo", { digestTimezone: "Europe/Paris" }); // idempotent
    const runId = await triggerSchedule("digest:solo", { db: env.db.jobs });
    let result: { day: string; mailId: number } | undefined;
    const digest = digestHandler(env.db.jobs, env.config);
    expect(await processOne({ [DIGEST_TASK]: async (p: { org: string }, ctx) => (result = await digest(p, ctx)) }, { queue: "mails", db: env.db.jobs })).toBe(
      true,
    );
    expect((await getJob(runId, { db: env.db.jobs }))!.status).toBe("done");
    expect(result!.day).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(await getJob(result!.mailId, { db: env.db.jobs })).toMatchObject({
      task: MAIL_JOB_TASK,
      tenant: "solo",
      concurrencyKey: "smtp:default",
      payload: { subject: `Daily digest for solo, ${result!.day}` },
    });
  });

  it("an org that sends a campaign gets its digest schedule, once however many campaigns", async () => {
    for (const id of ["spring", "summer"]) {
      const response = await fetch(`${server.url}/orgs/acme/campaigns/${id}/send`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ subject: "Hi", text: "Hello", recipients: [{ email: "a@example.org" }] }),
      });
      expect(response.status).toBe(202);
    }
    const digests = (await listSchedules({ db: env.db.jobs })).filter((s) => s.name === "digest:acme");
    expect(digests).toEqual([expect.objectContaining({ cron: DIGEST_CRON, task: DIGEST_TASK, queue: "mails", paused: false })]);
    expect(digests[0]!.nextRunAt).toBeInstanceOf(Date);
  });
});
