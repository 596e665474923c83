import { getJob, runWorker } from "@forge/jobs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countContacts } from "../src/contacts.js";
import { createHandlers, QUEUES } from "../src/handlers.js";
import { backendNames, createEnv, csvUpload, startApp, waitFor, type Env } from "./support.js";

const names = await backendNames();

const CSV = [
  "email,name,age",
  "ada@example.org,Ada Lovelace,36",
  "alan@example.org,Alan Turing,",
  "not-an-email,Nobody,20",
  "grace@example.org,,85",
  "GRACE@example.org,Grace Hopper,85",
].join("\n");

describe.each(names)("check file, rejected rows, re-import, header check (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  const stop = new AbortController();
  let worker: Promise<void>;

  beforeAll(async () => {
    env = await createEnv(name, { maxUploadBytes: 1 << 20 });
    server = await startApp(env);
    // No mail in these tests: the SMTP URL is never dialled.
    const handlers = createHandlers({ ...env.config, smtpUrl: "smtp://127.0.0.1:9" }, env.db);
    worker = runWorker(handlers, { queue: Object.values(QUEUES), db: env.db.jobs, signal: stop.signal, pollInterval: 0.05 });
  });
  afterAll(async () => {
    stop.abort();
    await worker;
    await server?.close();
    await env?.close();
  });

  async function upload(org: string, csv: string | Buffer, route = "imports") {
    const response = await fetch(`${server.url}/orgs/${org}/${route}`, { method: "POST", body: csvUpload(csv) });
    expect(response.status).toBe(202);
    return (await response.json()) as { importId: string; jobId: number; rejects: string };
  }
  async function finished(jobId: number) {
    return waitFor(`job ${jobId} to end`, async () => {
      const job = await getJob(jobId, { db: env.db.jobs });
      return job !== null && (job.status === "done" || job.status === "failed" || job.lastError !== null) && job;
    });
  }

  it("a check reports what the import would do and writes nothing; the import then does it; a second import creates nothing", async () => {
    const check = await upload("checked", CSV, "imports/checks");
    const checked = await finished(check.jobId);
    expect(checked.result).toMatchObject({ dryRun: true, read: 5, imported: 3, rejected: 2, created: 3, updated: 0, unchanged: 0 });
    expect(await countContacts(env.db, "checked")).toBe(0);

    const first = await finished((await upload("checked", CSV)).jobId);
    expect(first.status).toBe("done");
    expect(first.result).toMatchObject({
      read: 5,
      imported: 3,
      rejected: 2,
      created: 3,
      updated: 0,
      unchanged: 0,
      format: { encoding: "utf8", delimiter: "," },
    });
    expect(await countContacts(env.db, "checked")).toBe(3);

    const again = await finished((await upload("checked", CSV.replace("Alan Turing", "A. M. Turing"))).jobId);
    expect(again.result).toMatchObject({ imported: 3, created: 0, updated: 1, unchanged: 2 });
    expect(await countContacts(env.db, "checked")).toBe(3);
  });

  it("serves the rejected rows as a CSV to fix and upload again, to its own org only", async () => {
    const sent = await upload("rejecting", CSV);
    await finished(sent.jobId);
    const response = await fetch(`${server.url}${sent.rejects}`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/csv/);
    const text = await response.text();
    expect(text.trim().split("\n")).toEqual([
      "email,name,age,import_line,import_errors",
      'not-an-email,Nobody,20,4,"email: ""not-an-email"" is not a valid email address"',
      "grace@example.org,,85,5,name: is required",
    ]);
    expect((await fetch(`${server.url}${sent.rejects.replace("rejecting", "other")}`)).status).toBe(404);
    // Not a UUID: refused by the route's schema, naming the parameter.
    const traversal = await fetch(`${server.url}/orgs/rejecting/imports/..%2F..%2Fsecrets/rejects.csv`);
    expect(traversal.status).toBe(400);
    expect(((await traversal.json()) as { errors: { field: string }[] }).errors.map((e) => e.field)).toEqual(["importId"]);

    const fixed = await finished((await upload("rejecting", text.replace("not-an-email", "nobody@example.org").replace("org,,85", "org,Grace,85"))).jobId);
    expect(fixed.result).toMatchObject({ read: 2, imported: 2, rejected: 0 });
    expect(await countContacts(env.db, "rejecting")).toBe(4);
  });

  it("a file without the required columns fails at once (no retry), saying what was expected and found", async () => {
    const job = await finished((await upload("wrong", "sku,price\nA1,3.50\n")).jobId);
    expect(job.status).toBe("failed");
    expect(job.attempts).toBe(1);
    expect(job.lastError).toContain('the header lacks the required columns "email", "name": expected email, name (optional: age); found "sku", "price"');
  });

  it("a spreadsheet's export (Windows-1252, semicolons, other column names) imports as it is", async () => {
    const excel = Buffer.from("E-mail address;Full name;Age\r\nzoe@example.org;Zoë Ångström;41\r\n", "latin1");
    const job = await finished((await upload("excel", excel)).jobId);
    expect(job.result).toMatchObject({ imported: 1, format: { encoding: "windows-1252", delimiter: ";" } });
    const { rows } = await env.db.sql.query<{ name: string }>(`SELECT name FROM ${env.db.contacts} WHERE org = $1`, ["excel"]);
    expect(rows).toEqual([{ name: "Zoë Ångström" }]);
  });

  it("a binary upload fails at once", async () => {
    const job = await finished((await upload("binary", Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]))).jobId);
    expect(job.status).toBe("failed");
    expect(job.lastError).toMatch(/cannot be imported as CSV: it holds NUL bytes/);
  });
});
