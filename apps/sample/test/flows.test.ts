// The sample's use of dependencies and batches (src/flows.ts): an import's report mailed to the
// org's admins when the import ends, done or failed; a campaign sent as a batch whose callback
// marks it sent with the counts. Real app, real database, real SMTP on loopback.
import { rm } from "node:fs/promises";
import path from "node:path";
import { cancelJob, drain, getJob } from "@forge/jobs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHandlers, QUEUES } from "../src/handlers.js";
import { backendNames, createEnv, csvUpload, startApp, startSmtp, type Env } from "./support.js";

const names = await backendNames();

describe.each(names)("flows in the sample app (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let handlers: ReturnType<typeof createHandlers>;
  beforeAll(async () => {
    smtp = await startSmtp();
    env = await createEnv(name);
    server = await startApp(env);
    handlers = createHandlers({ ...env.config, smtpUrl: smtp.url }, env.db);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
    await smtp?.close();
  });

  const send = (method: string, url: string, body: unknown) =>
    fetch(`${server.url}${url}`, { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const runAll = async () => {
    while ((await drain(handlers, { db: env.db.jobs, queue: QUEUES.imports })) + (await drain(handlers, { db: env.db.jobs, queue: QUEUES.mails })) > 0);
  };

  it("an import's report waits for it, then mails the org's admins how it went, done or failed", async () => {
    expect((await send("PUT", "/orgs/acme/admins", { emails: ["boss@example.org", "ops@example.org"] })).status).toBe(204);
    expect((await send("PUT", "/orgs/acme/admins", { emails: ["not-an-email"] })).status).toBe(400);

    const ok = (await (
      await fetch(`${server.url}/orgs/acme/imports`, { method: "POST", body: csvUpload("email,name\nada@example.org,Ada\nbad,Bob\n") })
    ).json()) as {
      jobId: number;
      importId: string;
    };
    const [report] = (await getJob(ok.jobId, { db: env.db.jobs }))!.dependents;
    expect(await getJob(report!, { db: env.db.jobs })).toMatchObject({ status: "waiting", dependsOn: [ok.jobId] });
    await runAll();
    expect(await getJob(report!, { db: env.db.jobs })).toMatchObject({ status: "done", result: { status: "done", mailed: 2 } });
    const okMails = smtp.messages.filter((m) => m.subject.includes(ok.importId));
    expect(
      okMails
        .map((m) => m.to)
        .flat()
        .sort(),
    ).toEqual(["boss@example.org", "ops@example.org"]);
    // (The catcher's subject is the header's first line; the body says it all.)
    expect(okMails[0]!.raw).toContain("2 rows read, 1 imported, 1 rejected");

    // An import that does not complete (cancelled here; failed for good is the next test): the report still runs.
    const stopped = (await (
      await fetch(`${server.url}/orgs/acme/imports`, { method: "POST", body: csvUpload("email,name\ngrace@example.org,Grace\n") })
    ).json()) as {
      jobId: number;
      importId: string;
    };
    expect(await cancelJob(stopped.jobId, { db: env.db.jobs, tenant: "acme" })).toBe(true);
    await runAll();
    const stoppedMails = smtp.messages.filter((m) => m.subject.startsWith(`Import ${stopped.importId}`));
    expect(stoppedMails).toHaveLength(2);
    expect(stoppedMails[0]!.raw).toContain(`The import job ${stopped.jobId} ended cancelled`);
  });

  it("an import that fails for good (its 3 attempts spent) still gets its report: the admins are told it failed", async () => {
    expect((await send("PUT", "/orgs/lost/admins", { emails: ["boss@example.org"] })).status).toBe(204);
    const lost = (await (await fetch(`${server.url}/orgs/lost/imports`, { method: "POST", body: csvUpload("email,name\nada@example.org,Ada\n") })).json()) as {
      jobId: number;
      importId: string;
    };
    const [report] = (await getJob(lost.jobId, { db: env.db.jobs }))!.dependents;
    // The upload is gone before the worker reads it: every attempt fails with a retryable error.
    await rm(path.join(env.config.dataDir, "uploads", "lost", `${lost.importId}.csv`));
    for (let attempt = 1; attempt <= 3; attempt++) {
      // The last attempt releases the report, which the same drain then runs (same queue).
      expect(await drain(handlers, { db: env.db.jobs, queue: QUEUES.imports })).toBe(attempt < 3 ? 1 : 2);
      const job = await getJob(lost.jobId, { db: env.db.jobs });
      expect(job).toMatchObject({ attempts: attempt, status: attempt < 3 ? "pending" : "failed" });
      expect(await getJob(report!, { db: env.db.jobs })).toMatchObject({ status: attempt < 3 ? "waiting" : "done" });
      // The next attempt now, not after its backoff.
      await env.db.sql.query(`UPDATE ${env.db.jobs.table} SET run_at = created_at WHERE id = $1`, [lost.jobId]);
    }
    await runAll();
    expect(await getJob(report!, { db: env.db.jobs })).toMatchObject({ status: "done", result: { status: "failed", mailed: 1 } });
    const mails = smtp.messages.filter((m) => m.subject.startsWith(`Import ${lost.importId}`));
    expect(mails.map((m) => m.to).flat()).toEqual(["boss@example.org"]);
    expect(mails[0]!.raw).toContain(`The import job ${lost.jobId} ended failed`);
  });

  it("a campaign sent as a batch is marked sent by its callback, with the counts; a second send returns the same jobs", async () => {
    const campaign = { subject: "Spring", text: "Hello", recipients: [{ email: "a@example.org" }, { email: "b@example.org" }] };
    const first = (await (await send("POST", "/orgs/acme/campaigns/spring/batch", campaign)).json()) as { jobIds: number[]; batchId: number };
    expect(first.jobIds).toHaveLength(2);
    const again = (await (await send("POST", "/orgs/acme/campaigns/spring/batch", campaign)).json()) as { jobIds: number[] };
    expect(again.jobIds).toEqual(first.jobIds);
    expect(await (await fetch(`${server.url}/orgs/acme/campaigns/spring/batch`)).json()).toMatchObject({ sentAt: null, counts: null });
    await runAll();
    expect(await (await fetch(`${server.url}/orgs/acme/campaigns/spring/batch`)).json()).toMatchObject({
      batchId: first.batchId,
      counts: { done: 2, failed: 0, cancelled: 0, failedIds: [] },
    });
    expect(smtp.messages.filter((m) => m.subject === "Spring")).toHaveLength(2);
  });
});
