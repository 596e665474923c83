import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { getJob, runWorker, statusCounts } from "@forge/jobs";
import { IMPORT_JOB_TASK } from "@forge/import-export";
import { MAIL_JOB_TASK } from "@forge/mail";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countContacts } from "../src/contacts.js";
import { createHandlers, QUEUES } from "../src/handlers.js";
import { backendNames, createEnv, csvUpload, startApp, startSmtp, waitFor, type Env } from "./support.js";

const names = await backendNames();
const ADMIN_TOKEN = "test-admin-token-123";

const CSV = [
  "email,name,age",
  "ada@example.org,Ada Lovelace,36",
  "alan@example.org,Alan Turing,",
  "not-an-email,Nobody,20",
  "grace@example.org,,85",
  "linus@example.org,Linus,-3",
  "GRACE@example.org,Grace Hopper,85",
].join("\n");

describe.each(names)("the sample app (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  const json = (route: string, body: unknown) =>
    fetch(`${server.url}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

  beforeAll(async () => {
    env = await createEnv(name, { maxUploadBytes: 4096, adminToken: ADMIN_TOKEN });
    server = await startApp(env);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
  });

  describe("POST /orgs/:org/campaigns/:id/send", () => {
    const campaign = {
      subject: "Spring news",
      text: "Hello!",
      recipients: [{ email: "ada@example.org", name: "Ada" }, { email: "alan@example.org" }, { email: "grace@example.org", name: "Grace H." }],
    };

    it("answers 202 with one mail job per recipient, enqueued for the org (its tenant and group) under the provider's key, on queue mails with 5 attempts", async () => {
      const response = await json("/orgs/acme/campaigns/spring/send", campaign);
      expect(response.status).toBe(202);
      const body = (await response.json()) as { jobIds: number[]; jobs: { email: string; jobId: number }[] };
      expect(body.jobIds).toHaveLength(3);
      expect(body.jobs.map((j) => j.email)).toEqual(["ada@example.org", "alan@example.org", "grace@example.org"]);
      const job = await getJob(body.jobIds[0]!, { db: env.db.jobs });
      expect(job).toMatchObject({
        task: MAIL_JOB_TASK,
        queue: "mails",
        tenant: "acme",
        group: "acme",
        concurrencyKey: "smtp:default",
        maxAttempts: 5,
        status: "pending",
        idempotencyKey: "campaign:acme:spring:ada@example.org",
        payload: { v: 1, subject: "Spring news", text: "Hello!", to: [{ name: "Ada", address: "ada@example.org" }] },
      });
    });

    it("a double click sends nothing twice: the same ids, no new job", async () => {
      const before = await env.count();
      const first = (await (await json("/orgs/acme/campaigns/twice/send", campaign)).json()) as { jobIds: number[] };
      const second = await json("/orgs/acme/campaigns/twice/send", campaign);
      expect(second.status).toBe(202);
      expect(((await second.json()) as { jobIds: number[] }).jobIds).toEqual(first.jobIds);
      expect(await env.count()).toBe(before + 3);
    });

    it.each([
      ["no body fields", {}, ["subject", "text", "recipients"]],
      ["an empty recipient list", { ...campaign, recipients: [] }, ["recipients"]],
      [
        "a bad email and a missing one (the schema)",
        { ...campaign, recipients: [{ email: "bob@" }, { name: "x" }, { email: "a@b.co" }, { email: "A@b.co" }] },
        ["recipients[0].email", "recipients[1].email"],
      ],
      ["a repeated email (checked once the schema passes)", { ...campaign, recipients: [{ email: "a@b.co" }, { email: "A@b.co" }] }, ["recipients[1].email"]],
      ["a blank subject", { ...campaign, subject: "   " }, ["subject"]],
      ["a subject with a line break (header injection)", { ...campaign, subject: "Hi\r\nBcc: victim@example.org" }, ["subject"]],
      ["unknown fields", { ...campaign, html: "<b>x</b>", recipients: [{ email: "a@b.co", cc: "c@d.co" }] }, ["html", "recipients[0].cc"]],
      ["a recipient that is not an object", { ...campaign, recipients: ["a@b.co"] }, ["recipients[0]"]],
      ["a name on two lines", { ...campaign, recipients: [{ email: "a@b.co", name: "A\nB" }] }, ["recipients[0].name"]],
    ])("answers 400 problem+json for %s, and enqueues nothing", async (_what, body, fields) => {
      const before = await env.count();
      const response = await json("/orgs/acme/campaigns/bad/send", body);
      expect(response.status).toBe(400);
      expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      const problem = (await response.json()) as { type: string; title: string; status: number; detail: string; errors: { field: string; message: string }[] };
      expect(problem).toMatchObject({ type: expect.any(String), title: "Invalid request", status: 400, detail: expect.any(String) });
      expect(problem.errors.map((e) => e.field)).toEqual(fields);
      for (const e of problem.errors) expect(e.message).not.toBe("");
      expect(await env.count()).toBe(before);
    });

    it("answers 400 for a body that is not JSON, a bad org or campaign id, and enqueues nothing", async () => {
      const before = await env.count();
      const broken = await fetch(`${server.url}/orgs/acme/campaigns/x/send`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{nope",
      });
      expect(broken.status).toBe(400);
      expect(broken.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      const badOrg = await json("/orgs/ACME..%2F/campaigns/x/send", campaign);
      expect(badOrg.status).toBe(400);
      expect(((await badOrg.json()) as { errors: { field: string }[] }).errors.map((e) => e.field)).toEqual(["org"]);
      expect(await env.count()).toBe(before);
    });
  });

  describe("POST /orgs/:org/imports", () => {
    it("stores the upload under data/uploads/<org>/<uuid>.csv and answers 202 with the job and import ids", async () => {
      const response = await fetch(`${server.url}/orgs/acme/imports`, { method: "POST", body: csvUpload(CSV) });
      expect(response.status).toBe(202);
      const body = (await response.json()) as { importId: string; jobId: number };
      expect(body.importId).toMatch(/^[0-9a-f-]{36}$/);
      const stored = path.join(env.config.dataDir, "uploads", "acme", `${body.importId}.csv`);
      expect(await readFile(stored, "utf8")).toBe(CSV);
      expect(await getJob(body.jobId, { db: env.db.jobs })).toMatchObject({
        task: IMPORT_JOB_TASK,
        queue: "imports",
        tenant: "acme",
        group: "acme",
        maxAttempts: 3,
        payload: { importer: "contacts", file: `${body.importId}.csv` },
      });
      const { rows } = await env.db.sql.query<{ org: string; file: string; job_id: number | string }>(
        `SELECT org, file, job_id FROM ${env.db.imports} WHERE id = $1`,
        [body.importId],
      );
      expect(rows.map((r) => ({ ...r, job_id: Number(r.job_id) }))).toEqual([{ org: "acme", file: `acme/${body.importId}.csv`, job_id: body.jobId }]);
    });

    it("answers 413 over the size limit, keeping neither a file nor a job", async () => {
      const before = await env.count();
      const response = await fetch(`${server.url}/orgs/big/imports`, { method: "POST", body: csvUpload("email,name\n" + "x".repeat(10_000)) });
      expect(response.status).toBe(413);
      expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(((await response.json()) as { status: number }).status).toBe(413);
      expect(await env.count()).toBe(before);
      expect(await readdir(path.join(env.config.dataDir, "uploads", "big"))).toEqual([]);
    });

    it("answers 400 without a file, with an empty one, or when the body is not multipart", async () => {
      const before = await env.count();
      const noFile = new FormData();
      noFile.append("note", "hello");
      for (const body of [noFile, csvUpload(""), csvUpload(CSV, "c.csv", "upload")]) {
        const response = await fetch(`${server.url}/orgs/acme/imports`, { method: "POST", body });
        expect(response.status).toBe(400);
        expect(((await response.json()) as { errors: { field: string }[] }).errors[0]!.field).toBe("file");
      }
      const notMultipart = await fetch(`${server.url}/orgs/acme/imports`, { method: "POST", headers: { "content-type": "text/csv" }, body: CSV });
      expect(notMultipart.status).toBe(415);
      expect(notMultipart.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(await env.count()).toBe(before);
    });

    it("writes the import row and its job in one transaction: when the row fails after the enqueue, no job remains", async () => {
      await env.breakImportsFor("doomed");
      const response = await fetch(`${server.url}/orgs/doomed/imports`, { method: "POST", body: csvUpload(CSV) });
      expect(response.status).toBe(500);
      expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(await env.count("tenant = $1", ["doomed"])).toBe(0);
      const { rows } = await env.db.sql.query(`SELECT id FROM ${env.db.imports} WHERE org = $1`, ["doomed"]);
      expect(rows).toEqual([]);
      expect(await readdir(path.join(env.config.dataDir, "uploads", "doomed"))).toEqual([]);
    });
  });

  describe("GET /orgs/:org/jobs/:id", () => {
    it("returns the org's job; another org's job is 404 with exactly the answer of a missing one", async () => {
      const sent = (await (await json("/orgs/acme/campaigns/scoped/send", { subject: "s", text: "t", recipients: [{ email: "x@example.org" }] })).json()) as {
        jobIds: number[];
      };
      const id = sent.jobIds[0]!;
      const own = await fetch(`${server.url}/orgs/acme/jobs/${id}`);
      expect(own.status).toBe(200);
      expect(await own.json()).toMatchObject({ id, status: "pending", attempts: 0, maxAttempts: 5, progress: null, result: null, queue: "mails" });

      const other = await fetch(`${server.url}/orgs/globex/jobs/${id}`);
      const missing = await fetch(`${server.url}/orgs/globex/jobs/987654321`);
      expect(other.status).toBe(404);
      expect(missing.status).toBe(404);
      expect(other.headers.get("content-type")).toBe(missing.headers.get("content-type"));
      expect(await other.text()).toBe(await missing.text());
    });

    it("answers 400 for an id that cannot be a job", async () => {
      expect((await fetch(`${server.url}/orgs/acme/jobs/abc`)).status).toBe(400);
      expect((await fetch(`${server.url}/orgs/acme/jobs/0`)).status).toBe(400);
    });
  });

  describe("GET /admin/jobs", () => {
    it("needs the admin token (Bearer, or a session from the login form), never in the URL: 401 problem+json otherwise (issue 16.13)", async () => {
      const none = await fetch(`${server.url}/admin/jobs`);
      expect(none.status).toBe(401);
      expect(none.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect((await fetch(`${server.url}/admin/jobs`, { headers: { authorization: "Bearer wrong" } })).status).toBe(401);
      expect((await fetch(`${server.url}/admin/jobs/jobs/1/retry`, { method: "POST" })).status).toBe(401);
      // The token in the query string is no way in (it would land in access logs and every link).
      expect((await fetch(`${server.url}/admin/jobs?token=${ADMIN_TOKEN}`)).status).toBe(401);
      const bearer = await fetch(`${server.url}/admin/jobs`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(bearer.status).toBe(200);
      const html = await bearer.text();
      expect(html).toContain('data-queue="mails"');
      expect(html).not.toContain(ADMIN_TOKEN);

      // A browser is sent to sign in; the form post sets an HttpOnly session cookie.
      const browser = await fetch(`${server.url}/admin/jobs`, { headers: { accept: "text/html" }, redirect: "manual" });
      expect(browser.status).toBe(303);
      expect(browser.headers.get("location")).toBe("/admin/login");
      const form = { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, redirect: "manual" as const };
      expect((await fetch(`${server.url}/admin/login`, { ...form, body: "token=wrong" })).status).toBe(401);
      const elsewhere = await fetch(`${server.url}/admin/login`, {
        ...form,
        headers: { ...form.headers, origin: "https://evil.example" },
        body: `token=${ADMIN_TOKEN}`,
      });
      expect(elsewhere.status).toBe(401);
      const signedIn = await fetch(`${server.url}/admin/login`, { ...form, body: `token=${encodeURIComponent(ADMIN_TOKEN)}` });
      expect(signedIn.status).toBe(303);
      expect(signedIn.headers.get("location")).toBe("/admin/jobs");
      const cookie = signedIn.headers.get("set-cookie")!;
      expect(cookie).toMatch(/^forge_admin=\d+\.[\w-]+; Path=\/admin; Max-Age=\d+; HttpOnly; SameSite=Strict/);
      expect(cookie).not.toContain(ADMIN_TOKEN);
      const session = cookie.split(";")[0]!;
      expect((await fetch(`${server.url}/admin/jobs`, { headers: { cookie: session } })).status).toBe(200);
      const forged = session.replace(/\.[\w-]+$/, ".forged");
      expect((await fetch(`${server.url}/admin/jobs`, { headers: { cookie: forged } })).status).toBe(401);
    });

    it("is disabled (404) with a log line when ADMIN_TOKEN is unset", async () => {
      const lines: string[] = [];
      const stream = { write: (line: string) => void lines.push(line) };
      const other = await startApp(env, { adminToken: undefined }, { level: "info", stream });
      try {
        expect((await fetch(`${other.url}/admin/jobs`)).status).toBe(404);
        expect((await fetch(`${other.url}/admin/login`)).status).toBe(404);
        expect(lines.join("")).toContain("ADMIN_TOKEN is not set: the queue dashboard at /admin/jobs is disabled");
      } finally {
        await other.close();
      }
    });
  });

  describe("with a worker and a real SMTP server", () => {
    it("sends the campaign, imports the CSV (rejecting invalid rows), exports the contacts", async () => {
      const smtp = await startSmtp();
      const stop = new AbortController();
      const handlers = createHandlers({ ...env.config, smtpUrl: smtp.url }, env.db);
      const worker = runWorker(handlers, { queue: Object.values(QUEUES), db: env.db.jobs, signal: stop.signal, pollInterval: 0.05 });
      try {
        const sent = (await (
          await json("/orgs/initech/campaigns/launch/send", {
            subject: "Launch",
            text: "We are live.",
            recipients: [{ email: "one@example.org", name: "One" }, { email: "two@example.org" }],
          })
        ).json()) as { jobIds: number[] };
        const upload = (await (await fetch(`${server.url}/orgs/initech/imports`, { method: "POST", body: csvUpload(CSV) })).json()) as { jobId: number };

        const importJob = await waitFor("the import to finish", async () => {
          const body = (await (await fetch(`${server.url}/orgs/initech/jobs/${upload.jobId}`)).json()) as { status: string; result: unknown };
          return body.status === "done" && body;
        });
        expect(importJob.result).toEqual({
          read: 6,
          imported: 3,
          rejected: 3,
          created: 3,
          updated: 0,
          unchanged: 0,
          duplicates: 0,
          format: { encoding: "utf8", delimiter: "," },
          rejectsFile: expect.stringMatching(/\.rejects\.csv$/) as unknown,
          errors: [
            { line: 4, field: "email", message: '"not-an-email" is not a valid email address' },
            { line: 5, field: "name", message: "is required" },
            { line: 6, field: "age", message: '"-3" is not a whole number from 0 to 150' },
          ],
        });
        expect(await countContacts(env.db, "initech")).toBe(3);
        const { rows } = await env.db.sql.query<{ email: string; name: string; age: number | null }>(
          `SELECT email, name, age FROM ${env.db.contacts} WHERE org = $1 ORDER BY email`,
          ["initech"],
        );
        // GRACE@ on line 7 is the valid twin of line 5: stored lower-cased, once.
        expect(rows).toEqual([
          { email: "ada@example.org", name: "Ada Lovelace", age: 36 },
          { email: "alan@example.org", name: "Alan Turing", age: null },
          { email: "grace@example.org", name: "Grace Hopper", age: 85 },
        ]);

        // Earlier tests left mail jobs of other campaigns: this worker sends them too.
        const launch = () => smtp.messages.filter((m) => m.raw.includes("X-Campaign: initech/launch"));
        await waitFor("two mails", async () => launch().length >= 2);
        expect(
          launch()
            .map((m) => m.to)
            .sort(),
        ).toEqual([["one@example.org"], ["two@example.org"]]);
        expect(launch()[0]!.subject).toBe("Launch");
        for (const id of sent.jobIds) {
          await waitFor(`mail job ${id} done`, async () => (await getJob(id, { db: env.db.jobs }))?.status === "done");
        }

        const exported = (await (await fetch(`${server.url}/orgs/initech/exports`, { method: "POST" })).json()) as { jobId: number; download: string };
        await waitFor("the export", async () => (await getJob(exported.jobId, { db: env.db.jobs }))?.status === "done");
        const csv = await (await fetch(`${server.url}${exported.download}`)).text();
        expect(csv.trim().split("\n")).toEqual([
          "email,name,age",
          "ada@example.org,Ada Lovelace,36",
          "alan@example.org,Alan Turing,",
          "grace@example.org,Grace Hopper,85",
        ]);
        expect((await fetch(`${server.url}${exported.download.replace("initech", "acme")}`)).status).toBe(404);
      } finally {
        stop.abort();
        await worker;
        await smtp.close();
      }
      const counts = await statusCounts({ db: env.db.jobs, queue: "imports" });
      expect(counts[0]!.counts.failed).toBe(0);
    });

    it("refuses to start without SMTP_URL", () => {
      expect(() => createHandlers({ ...env.config, smtpUrl: undefined }, env.db)).toThrow(/SMTP_URL/);
    });
  });
});
