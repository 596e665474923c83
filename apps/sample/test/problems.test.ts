import { mkdir, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import path from "node:path";
import { Writable } from "node:stream";
import { enqueue, processOne } from "@forge/jobs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { APP_DIR } from "../src/config.js";
import { createLogger } from "../src/logging.js";
import { withoutServerPaths } from "../src/problems.js";
import { createEnv, csvUpload, type Env } from "./support.js";

// Issue 16.19 and 16.13: every error is Problem Details naming its field, from the TypeBox
// schemas that also give the OpenAPI description; no error shows a server path or a stack.

interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: { field: string; message: string }[];
}

const campaign = { subject: "Hi", text: "Hello", recipients: [{ email: "ada@example.org" }] };

describe("the sample's request validation and error answers (issue 16.19, 16.13)", () => {
  let env: Env;
  let url: string;
  let close: () => Promise<unknown>;
  const logLines: string[] = [];

  beforeAll(async () => {
    env = await createEnv("sqlite");
    // The web process's own logger (pino, JSON lines), captured.
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
        done();
      },
    });
    const { app } = await buildApp(env.config, { db: env.db, loggerInstance: createLogger("web", destination) });
    // A route that fails the way real code does: an fs error carrying an absolute path, and a stack.
    app.get("/test/explode", async () => {
      const { readFile } = await import("node:fs/promises");
      return readFile(path.join(env.config.dataDir, "missing", "secret.json"), "utf8");
    });
    app.get("/test/client-error", async () => {
      throw Object.assign(new Error(`cannot read ${path.join(APP_DIR, "src", "x.ts")} at file:///srv/app/x.js`), { statusCode: 409 });
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    close = () => app.close();
  });
  afterAll(async () => {
    await close?.();
    await env?.close();
  });

  const post = (route: string, body: string, type = "application/json") => fetch(`${url}${route}`, { method: "POST", headers: { "content-type": type }, body });

  async function problem(response: Response, status: number): Promise<Problem> {
    expect(response.status).toBe(status);
    expect(response.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    const body = (await response.json()) as Problem;
    expect(body).toMatchObject({ type: expect.stringMatching(/^urn:/), title: expect.any(String), status, detail: expect.any(String) });
    return body;
  }

  const fields = (p: Problem) => Object.fromEntries((p.errors ?? []).map((e) => [e.field, e.message]));

  it('says a field has the wrong type ({"subject": 5}), not that it is required', async () => {
    const body = await problem(await post("/orgs/acme/campaigns/c1/send", JSON.stringify({ ...campaign, subject: 5 })), 400);
    expect(body.errors).toEqual([{ field: "subject", message: "must be a string, not a number" }]);
    const all = await problem(
      await post("/orgs/acme/campaigns/c1/send", JSON.stringify({ subject: 5, text: ["x"], recipients: [{ email: 7, name: null }, "x"] })),
      400,
    );
    expect(fields(all)).toEqual({
      subject: "must be a string, not a number",
      text: "must be a string, not an array",
      "recipients[0].email": "must be a string, not a number",
      "recipients[0].name": "must be a string, not null",
      "recipients[1]": "must be an object, not a string",
    });
    const reset = await problem(await post("/orgs/acme/password-resets", JSON.stringify({ email: 5 })), 400);
    expect(reset.errors).toEqual([{ field: "email", message: "must be a string, not a number" }]);
  });

  it("names missing, unknown, too long and badly shaped fields, every one at once", async () => {
    const body = await problem(
      await post("/orgs/acme/campaigns/c1/send", JSON.stringify({ subject: "x".repeat(201), recipients: [{ email: "bob@", cc: "a@b.co" }], html: "<b>" })),
      400,
    );
    expect(fields(body)).toEqual({
      text: "is required",
      html: "is not a known field (subject, text, recipients)",
      subject: "is longer than 200 characters",
      "recipients[0].cc": "is not a known field (email, name)",
      "recipients[0].email": "must be an email address",
    });
    const root = await problem(await post("/orgs/acme/campaigns/c1/send", "[1, 2]"), 400);
    expect(root.errors).toEqual([{ field: "body", message: "must be an object, not an array" }]);
    const notJson = await problem(await post("/orgs/acme/campaigns/c1/send", "{nope"), 400);
    expect(notJson.errors?.[0]?.field).toBe("body");
  });

  it("names the path parameter that is wrong, with what it must be", async () => {
    const org = await problem(await post("/orgs/ACME/campaigns/c1/send", JSON.stringify(campaign)), 400);
    expect(org.errors).toEqual([{ field: "org", message: "must be 1–63 lowercase letters, digits, '-' or '_', starting with a letter or digit" }]);
    const id = await problem(await fetch(`${url}/orgs/acme/jobs/abc`), 400);
    expect(id.errors).toEqual([{ field: "id", message: "must be a job id (a positive integer)" }]);
    const file = await problem(await fetch(`${url}/orgs/acme/exports/passwd`), 400);
    expect(file.errors?.map((e) => e.field)).toEqual(["file"]);
  });

  it("answers 415 for a content type the route does not take, naming the content-type header", async () => {
    const body = await problem(await post("/orgs/acme/campaigns/c1/send", "subject=x", "text/plain"), 415);
    expect(body.errors).toEqual([{ field: "content-type", message: '"text/plain" is not a content type this route accepts' }]);
    const upload = await problem(await post("/orgs/acme/imports", "a,b", "text/csv"), 415);
    expect(upload.errors?.[0]?.field).toBe("content-type");
  });

  it("answers 414 for a path segment longer than the router takes, 431 for oversized headers: problem+json too", async () => {
    const long = await problem(await fetch(`${url}/orgs/${"a".repeat(120)}/jobs/1`), 414);
    expect(long.errors?.[0]?.field).toBe("path");
    const broken = await problem(await fetch(`${url}/orgs/%E0%A4%A/jobs/1`), 400);
    expect(broken.errors?.[0]?.field).toBe("path");
    const oversized = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
      const req = httpRequest(`${url}/health`, { headers: { "x-filler": "x".repeat(20_000) } }, (res) => {
        let text = "";
        res.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"]), body: text }));
      });
      req.on("error", reject);
      req.end();
    });
    expect(oversized.status).toBe(431);
    expect(oversized.type).toBe("application/problem+json");
    expect(JSON.parse(oversized.body)).toMatchObject({ status: 431, title: "Request Header Fields Too Large" });
  });

  it("describes every route in /openapi.json from the same schemas that validate them", async () => {
    const response = await fetch(`${url}/openapi.json`);
    expect(response.status).toBe(200);
    const doc = (await response.json()) as {
      openapi: string;
      paths: Record<
        string,
        Record<
          string,
          {
            parameters?: { name: string; schema: { pattern?: string } }[];
            requestBody?: { content: Record<string, { schema: unknown }> };
            responses: Record<string, unknown>;
          }
        >
      >;
    };
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        "/orgs/{org}/campaigns/{id}/send",
        "/orgs/{org}/password-resets",
        "/orgs/{org}/imports",
        "/orgs/{org}/exports",
        "/orgs/{org}/exports/{file}",
        "/orgs/{org}/jobs/{id}",
      ]),
    );
    expect(doc.paths["/openapi.json"]).toBeUndefined();
    const send = doc.paths["/orgs/{org}/campaigns/{id}/send"]!.post!;
    expect(send.requestBody!.content["application/json"]!.schema).toMatchObject({
      type: "object",
      required: ["subject", "text", "recipients"],
      additionalProperties: false,
      properties: { subject: { type: "string", maxLength: 200 }, recipients: { type: "array", maxItems: 1000 } },
    });
    expect(send.parameters?.find((p) => p.name === "org")?.schema.pattern).toBe("^[a-z0-9][a-z0-9_-]{0,62}$");
    expect(Object.keys(send.responses)).toEqual(expect.arrayContaining(["202", "400", "415"]));
  });

  it("never shows a server path or a stack to the client; the log has the whole error (issue 16.13)", async () => {
    const leaks = (text: string) => {
      expect(text).not.toContain(APP_DIR);
      expect(text).not.toContain(env.config.dataDir);
      expect(text).not.toMatch(/\n\s+at |file:\/\/|\/srv\//);
    };
    const crashed = await fetch(`${url}/test/explode`);
    const crashedText = await crashed.clone().text();
    const body = await problem(crashed, 500);
    expect(body.detail).toBe("The request failed; the error is in the server log.");
    leaks(crashedText);

    const client = await fetch(`${url}/test/client-error`);
    const clientText = await client.clone().text();
    const clientBody = await problem(client, 409);
    expect(clientBody.detail).toContain("cannot read …");
    leaks(clientText);

    // A real route forced to fail: the org's upload folder is a file, so storing the upload throws (EEXIST / ENOTDIR, with the path).
    await mkdir(path.join(env.config.dataDir, "uploads"), { recursive: true });
    await writeFile(path.join(env.config.dataDir, "uploads", "blocked"), "not a folder");
    const upload = await fetch(`${url}/orgs/blocked/imports`, { method: "POST", body: csvUpload("email\na@b.co\n") });
    const uploadText = await upload.clone().text();
    await problem(upload, 500);
    leaks(uploadText);

    // The server log: JSON lines of the web process, the errors with their stack.
    const records = logLines.map((line) => JSON.parse(line) as { process?: string; msg?: string; err?: { stack?: string } });
    expect(records.every((r) => r.process === "web")).toBe(true);
    const failed = records.filter((r) => r.msg === "request failed");
    expect(failed).toHaveLength(2);
    expect(failed[0]!.err?.stack).toContain("secret.json");
  });

  it("a job's last error reaches the org as its first line, without the stack or server paths", async () => {
    const id = await enqueue("sample.broken", null, { db: env.db.jobs, queue: "mails", tenant: "acme" });
    await processOne(
      {
        "sample.broken": () => {
          throw new Error(`EACCES: permission denied, open '${path.join(env.config.dataDir, "x.csv")}'`);
        },
      },
      { db: env.db.jobs, queue: "mails" },
    );
    const response = await fetch(`${url}/orgs/acme/jobs/${id}`);
    const text = await response.text();
    expect(JSON.parse(text)).toMatchObject({ status: "failed", lastError: "Error: EACCES: permission denied, open '…'" });
    expect(text).not.toContain(env.config.dataDir);
    expect(text).not.toMatch(/\n\s+at /);
  });

  it("cuts absolute server paths out of a message, and leaves URL paths alone", () => {
    expect(withoutServerPaths(`ENOENT: no such file or directory, open '${APP_DIR}/data/x.db'`)).toBe("ENOENT: no such file or directory, open '…'");
    expect(withoutServerPaths("open /home/u/app/x.js and C:\\app\\x.js and file:///opt/x.mjs")).toBe("open … and … and …");
    expect(withoutServerPaths("No route GET /orgs/acme/x")).toBe("No route GET /orgs/acme/x");
    // A server under a folder no list knows: the path goes whole, not from its first known segment on.
    expect(withoutServerPaths("cannot read /check/work/main/apps/sample/data/secret.json at /ci/build/x.js:3")).toBe("cannot read … at …");
    expect(withoutServerPaths("see /mnt2/app/x and a/b/c")).toBe("see … and a/b/c");
  });
});
