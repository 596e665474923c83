import { drain } from "@forge/jobs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";
import { createHandlers, mailHandler, mailTransport, QUEUES } from "../src/handlers.js";
import { backendNames, createEnv, startApp, startSmtp, type Env } from "./support.js";

const names = await backendNames();

describe("SMTP_POOL_CONNECTIONS", () => {
  it("is read as a whole number from 0 (no pool, the default) to 100", () => {
    expect(loadConfig({}).smtpPoolConnections).toBe(0);
    expect(loadConfig({ SMTP_POOL_CONNECTIONS: "4" }).smtpPoolConnections).toBe(4);
    expect(() => loadConfig({ SMTP_POOL_CONNECTIONS: "-1" })).toThrow(ConfigError);
    expect(() => loadConfig({ SMTP_POOL_CONNECTIONS: "2.5" })).toThrow(/SMTP_POOL_CONNECTIONS must be an integer from 0 to 100, got "2.5"/);
  });

  it("rides on the SMTP URL the worker's mail handler gets, keeping the URL's own parts", () => {
    expect(mailTransport({ smtpUrl: "smtp://u:p@smtp.example.org:587", smtpPoolConnections: 0 })).toBe("smtp://u:p@smtp.example.org:587");
    expect(mailTransport({ smtpUrl: "smtp://u:p@smtp.example.org:587/?name=worker1", smtpPoolConnections: 5 })).toBe(
      "smtp://u:p@smtp.example.org:587/?name=worker1&pool=true&maxConnections=5",
    );
    expect(mailTransport({ smtpUrl: undefined, smtpPoolConnections: 5 })).toBeUndefined();
  });
});

describe.each(names)("a campaign sent by the worker through a pooled transport (%s)", (name) => {
  let env: Env;
  let server: Awaited<ReturnType<typeof startApp>>;
  const RECIPIENTS = ["ana@example.org", "ben@example.org", "cy@example.org", "dee@example.org", "eli@example.org"];

  beforeAll(async () => {
    env = await createEnv(name);
    server = await startApp(env);
  });
  afterAll(async () => {
    await server?.close();
    await env?.close();
  });

  async function sendCampaign(id: string): Promise<void> {
    const response = await fetch(`${server.url}/orgs/acme/campaigns/${id}/send`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ subject: `Campaign ${id}`, text: "Hello", recipients: RECIPIENTS.map((email) => ({ email })) }),
    });
    expect(response.status).toBe(202);
  }

  it.each([
    [0, RECIPIENTS.length],
    [2, 1],
  ])("SMTP_POOL_CONNECTIONS=%i: every mail arrives, over %i connection(s)", async (pool, connections) => {
    await sendCampaign(`pool-${pool}`);
    const smtp = await startSmtp();
    const config = { ...env.config, smtpUrl: smtp.url, smtpPoolConnections: pool };
    const mail = mailHandler(config, env.db);
    const handlers = createHandlers(config, env.db, mail);
    try {
      // drain runs one job at a time: a pool's single connection carries every message in turn.
      expect(await drain(handlers, { queue: QUEUES.mails, db: env.db.jobs })).toBe(RECIPIENTS.length);
      expect(smtp.messages.map((m) => m.to[0]).sort()).toEqual(RECIPIENTS);
      expect(smtp.messages.every((m) => m.subject === `Campaign pool-${pool}`)).toBe(true);
      expect(smtp.connections).toBe(connections);
    } finally {
      mail.close();
      await smtp.close();
    }
  });
});
