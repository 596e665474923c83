import { drain, getJob } from "@forge/jobs";
import { createUnsubscribeToken } from "@forge/mail";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { createHandlers, QUEUES } from "../src/handlers.js";
import { suppressionList } from "../src/suppression.js";
import { backendNames, createEnv, startApp, startSmtp, type Env } from "./support.js";

const names = await backendNames();
const SECRET = "0123456789abcdef0123456789abcdef-sample";
const PUBLIC_URL = "https://sample.example.org";

describe.each(names)("one-click unsubscribe (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  const post = (route: string, body: string, type = "application/x-www-form-urlencoded") =>
    fetch(`${server.url}${route}`, { method: "POST", headers: { "content-type": type }, body });

  beforeAll(async () => {
    env = await createEnv(name, { publicUrl: PUBLIC_URL, unsubscribeSecret: SECRET });
    server = await startApp(env);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
  });

  it("a campaign mail carries the RFC 8058 headers; the provider's POST unsubscribes; the next campaign mail is not sent", async () => {
    const send = (id: string) =>
      fetch(`${server.url}/orgs/acme/campaigns/${id}/send`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ subject: "News", text: "Hello", recipients: [{ email: "Leaving@Example.org" }, { email: "staying@example.org" }] }),
      });
    const first = (await (await send("dec")).json()) as { jobIds: number[] };
    const job = await getJob(first.jobIds[0]!, { db: env.db.jobs });
    const headers = (job!.payload as { headers: { key: string; value: string }[] }).headers;
    const link = headers.find((h) => h.key === "List-Unsubscribe")!.value;
    expect(link).toMatch(/^<https:\/\/sample\.example\.org\/unsubscribe\?token=[\w-]+\.[\w-]+>$/);
    expect(headers).toContainEqual({ key: "List-Unsubscribe-Post", value: "List-Unsubscribe=One-Click" });
    const route = new URL(link.slice(1, -1)).pathname + new URL(link.slice(1, -1)).search;

    // A person opening the link gets a page with a button: GET changes nothing (link scanners).
    const page = await fetch(`${server.url}${route}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<form method="post"');
    expect(await suppressionList(env.db).isSuppressed(["leaving@example.org"])).toEqual([]);

    // The mailbox provider's one-click POST.
    const done = await post(route, "List-Unsubscribe=One-Click");
    expect(done.status).toBe(200);
    expect(await suppressionList(env.db).isSuppressed(["leaving@example.org"])).toEqual([{ address: "leaving@example.org", reason: "unsubscribe" }]);
    expect((await suppressionList(env.db).list())[0]).toMatchObject({ detail: "one-click from acme" });

    // The worker: the first campaign's mail to the address was still queued, and is held back too.
    await send("jan");
    const smtp = await startSmtp();
    try {
      await drain(createHandlers({ ...env.config, smtpUrl: smtp.url }, env.db), { queue: QUEUES.mails, db: env.db.jobs });
      expect(smtp.messages.map((m) => m.to)).toEqual([["staying@example.org"], ["staying@example.org"]]);
      expect((await getJob(first.jobIds[0]!, { db: env.db.jobs }))!.result).toMatchObject({
        skipped: "all-recipients-suppressed",
        suppressed: [{ address: "Leaving@Example.org", reason: "unsubscribe" }],
      });
    } finally {
      await smtp.close();
    }

    // Not bulk mail: a password reset still reaches the unsubscribed address.
    const reset = await fetch(`${server.url}/orgs/acme/password-resets`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "leaving@example.org" }),
    });
    expect(reset.status).toBe(202);
    const smtp2 = await startSmtp();
    try {
      await drain(createHandlers({ ...env.config, smtpUrl: smtp2.url }, env.db), { queue: QUEUES.mails, db: env.db.jobs });
      expect(smtp2.messages.map((m) => m.to)).toEqual([["leaving@example.org"]]);
    } finally {
      await smtp2.close();
    }
  });

  it("refuses a tampered or expired token (400, nothing added), and a POST without a token", async () => {
    const token = createUnsubscribeToken("victim@example.org", { secret: SECRET });
    const forged = `${Buffer.from(JSON.stringify({ a: "other@example.org", e: 4102444800 })).toString("base64url")}.${token.split(".")[1]}`;
    const expired = createUnsubscribeToken("old@example.org", { secret: SECRET, ttlSeconds: 60, now: new Date(Date.now() - 3600_000) });
    for (const [bad, text] of [
      [forged, "not valid"],
      [expired, "expired"],
    ] as const) {
      const response = await post(`/unsubscribe?token=${bad}`, "List-Unsubscribe=One-Click");
      expect(response.status).toBe(400);
      expect(await response.text()).toContain(text);
    }
    expect((await post("/unsubscribe", "List-Unsubscribe=One-Click")).status).toBe(400);
    expect(await suppressionList(env.db).isSuppressed(["other@example.org", "old@example.org", "victim@example.org"])).toEqual([]);
  });

  it("without UNSUBSCRIBE_SECRET there is no endpoint and campaign mails carry no link", async () => {
    const plain = await startApp(env, { publicUrl: undefined, unsubscribeSecret: undefined });
    try {
      expect((await fetch(`${plain.url}/unsubscribe?token=x`)).status).toBe(404);
      const sent = (await (
        await fetch(`${plain.url}/orgs/acme/campaigns/plain/send`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ subject: "S", text: "T", recipients: [{ email: "x@example.org" }] }),
        })
      ).json()) as { jobIds: number[] };
      const payload = (await getJob(sent.jobIds[0]!, { db: env.db.jobs }))!.payload as { headers: { key: string }[] };
      expect(payload.headers.map((h) => h.key)).toEqual(["X-Campaign"]);
    } finally {
      await plain.close();
    }
  });
});

describe("PUBLIC_URL and UNSUBSCRIBE_SECRET", () => {
  it("are read from the environment, and refused with a message naming the variable when malformed", () => {
    expect(loadConfig({ PUBLIC_URL: PUBLIC_URL, UNSUBSCRIBE_SECRET: SECRET })).toMatchObject({ publicUrl: PUBLIC_URL, unsubscribeSecret: SECRET });
    expect(() => loadConfig({ UNSUBSCRIBE_SECRET: "short" })).toThrow(/UNSUBSCRIBE_SECRET must be at least 32 characters/);
    expect(() => loadConfig({ PUBLIC_URL: "sample.example.org/x?y" })).toThrow(/PUBLIC_URL must be the app's base URL/);
  });
});
