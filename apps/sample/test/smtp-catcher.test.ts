import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startSmtpCatcher, type SmtpCatcher } from "../src/smtp-catcher.js";

/** A bare SMTP client: each call sends one line (or none) and resolves with the server's complete reply. */
async function smtpSession(url: string): Promise<{ say: (line?: string) => Promise<string>; socket: Socket }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let buffer = "";
  let waiting: ((reply: string) => void) | null = null;
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    buffer += chunk;
    // A reply ends with a line "NNN text"; "NNN-text" lines continue it.
    const end = /^\d{3} .*\r\n/m.exec(buffer);
    if (end && waiting) {
      const reply = buffer.slice(0, end.index + end[0].length);
      buffer = buffer.slice(reply.length);
      const resolve = waiting;
      waiting = null;
      resolve(reply);
    }
  });
  const say = (line?: string) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no SMTP reply to ${JSON.stringify(line ?? "(greeting)")}`)), 5_000);
      waiting = (reply) => (clearTimeout(timer), resolve(reply));
      if (line !== undefined) socket.write(`${line}\r\n`);
    });
  return { say, socket };
}

describe("the SMTP catcher", () => {
  let catcher: SmtpCatcher | undefined;
  afterEach(async () => {
    await catcher?.close();
    catcher = undefined;
  });

  async function send(): Promise<string> {
    const { say, socket } = await smtpSession(catcher!.url);
    try {
      expect(await say()).toMatch(/^220 /);
      expect(await say("EHLO test")).toMatch(/^250 /m);
      expect(await say("MAIL FROM:<from@example.org>")).toMatch(/^250 /);
      expect(await say("RCPT TO:<to@example.org>")).toMatch(/^250 /);
      expect(await say("DATA")).toMatch(/^354 /);
      return await say("Subject: hello\r\n\r\nbody\r\n.");
    } finally {
      socket.destroy();
    }
  }

  it("accepts a message and keeps it", async () => {
    catcher = await startSmtpCatcher();
    expect(await send()).toMatch(/^250 /);
    expect(catcher.messages).toMatchObject([{ from: "from@example.org", to: ["to@example.org"], subject: "hello" }]);
  });

  it("answers with an error when the hold rejects, instead of never replying", async () => {
    catcher = await startSmtpCatcher({ beforeAccept: () => Promise.reject(new Error("mailbox unavailable")) });
    expect(await send()).toMatch(/^4\d\d .*mailbox unavailable/);
    expect(catcher.messages).toEqual([]);
  });
});
