import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backendNames, createEnv, startApp, type Env } from "./support.js";

const names = await backendNames();

describe.each(names)("mail preview (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  const json = (route: string, body: unknown) =>
    fetch(`${server.url}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const campaign = { subject: "Winter <sale>", text: "Hello & welcome", recipients: [{ email: "ada@example.org", name: "Ada" }, { email: "bob@example.org" }] };

  beforeAll(async () => {
    env = await createEnv(name, { publicUrl: "https://sample.example.org", unsubscribeSecret: "0123456789abcdef0123456789abcdef" });
    server = await startApp(env);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
  });

  it("POST /orgs/:org/campaigns/:id/preview renders the first recipient's mail as HTML or .eml, and enqueues nothing", async () => {
    const before = await env.count();
    const page = await json("/orgs/acme/campaigns/winter/preview", campaign);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
    const html = await page.text();
    expect(html).toContain("<th>Subject</th><td>Winter &#60;sale&#62;</td>");
    expect(html).toContain("<th>To</th><td>Ada &#60;ada@example.org&#62;</td>");
    expect(html).toContain("Hello &#38; welcome");

    const eml = await json("/orgs/acme/campaigns/winter/preview?format=eml", campaign);
    expect(eml.headers.get("content-type")).toBe("message/rfc822");
    expect(eml.headers.get("content-disposition")).toBe('attachment; filename="campaign-winter.eml"');
    const raw = (await eml.text()).replace(/\r\n[ \t]+/g, " ");
    expect(raw).toMatch(/^To: Ada <ada@example\.org>\r$/m);
    expect(raw).toMatch(/^List-Unsubscribe: <https:\/\/sample\.example\.org\/unsubscribe\?token=/m);
    expect(raw).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m);
    expect(await env.count()).toBe(before);
  });

  it("answers 400 for an invalid campaign or format", async () => {
    // The body is checked by its schema first (one answer), the format after it.
    const response = await json("/orgs/acme/campaigns/winter/preview?format=pdf", { ...campaign, subject: "" });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { errors: { field: string }[] }).errors.map((e) => e.field)).toEqual(["subject"]);
    const format = await json("/orgs/acme/campaigns/winter/preview?format=pdf", campaign);
    expect(format.status).toBe(400);
    expect(((await format.json()) as { errors: { field: string }[] }).errors.map((e) => e.field)).toEqual(["format"]);
  });

  it("GET /orgs/:org/jobs/:id/mail-preview renders a queued mail job of the org, and nothing of another org's", async () => {
    const { jobId } = (await (await json("/orgs/acme/password-resets", { email: "ada@example.org" })).json()) as { jobId: number };
    const page = await fetch(`${server.url}/orgs/acme/jobs/${jobId}/mail-preview`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<th>Subject</th><td>Reset your password</td>");
    const eml = await (await fetch(`${server.url}/orgs/acme/jobs/${jobId}/mail-preview?format=eml`)).text();
    expect(eml).toMatch(/^Subject: Reset your password\r$/m);
    expect((await fetch(`${server.url}/orgs/other/jobs/${jobId}/mail-preview`)).status).toBe(404);
    expect((await fetch(`${server.url}/orgs/acme/jobs/999999/mail-preview`)).status).toBe(404);
  });
});
