import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { createLogger } from "../src/logging.js";
import { createEnv, type Env } from "./support.js";

// Issue 31.8: a token in a query string (the unsubscribe link's, or any other) is a secret: the
// web log keeps the URL but not the token, in the request lines and in the error lines.

const TOKEN = "c2VjcmV0LXRva2VuLXRleHQ.Zm9yZ2VkLXNpZ25hdHVyZQ";

describe("the web log holds no query-string secret (issue 31.8)", () => {
  let env: Env;
  let url: string;
  let close: () => Promise<unknown>;
  const logLines: string[] = [];

  beforeAll(async () => {
    env = await createEnv("sqlite", { publicUrl: "https://sample.example.org", unsubscribeSecret: "0123456789abcdef0123456789abcdef-sample" });
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
        done();
      },
    });
    const { app } = await buildApp(env.config, { db: env.db, loggerInstance: createLogger("web", destination) });
    // A route failing with its URL in the message, as a driver or a fetch error may.
    app.get("/test/explode", async (request) => {
      throw new Error(`could not serve ${request.url}`);
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    close = () => app.close();
  });
  afterAll(async () => {
    await close?.();
    await env?.close();
  });

  it("an unsubscribe token that is tried and refused, and a failing request's URL, reach the log without the token", async () => {
    expect((await fetch(`${url}/unsubscribe?token=${TOKEN}`)).status).toBe(400);
    const post = await fetch(`${url}/unsubscribe?list=news&token=${TOKEN}&x=1`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "List-Unsubscribe=One-Click",
    });
    expect(post.status).toBe(400);
    expect((await fetch(`${url}/test/explode?access_token=${TOKEN}`)).status).toBe(500);
    expect((await fetch(`${url}/nowhere?token=${TOKEN}`)).status).toBe(404);

    const records = logLines.map((line) => JSON.parse(line) as { msg?: string; req?: { url?: string }; err?: { message?: string } });
    const urls = records.filter((r) => r.msg === "incoming request").map((r) => r.req?.url);
    expect(urls).toEqual([
      "/unsubscribe?token=[redacted]",
      "/unsubscribe?list=news&token=[redacted]&x=1",
      "/test/explode?access_token=[redacted]",
      "/nowhere?token=[redacted]",
    ]);
    expect(records.find((r) => r.msg === "request failed")?.err?.message).toBe("could not serve /test/explode?access_token=[redacted]");
    // No line holds the token, nor a piece of it.
    for (const part of TOKEN.split(".")) expect(logLines.filter((line) => line.includes(part))).toEqual([]);
  });
});
