import { SMTPServer } from "smtp-server";

export interface CaughtMail {
  from: string;
  to: string[];
  subject: string;
  raw: string;
}

export interface SmtpCatcher {
  /** `smtp://127.0.0.1:<port>`: what SMTP_URL points at. */
  url: string;
  messages: CaughtMail[];
  /** SMTP sessions opened so far: one per message without a pool, fewer with one. */
  readonly connections: number;
  close(): Promise<void>;
}

export interface SmtpCatcherOptions {
  /** Delays the server's "250 OK" (tests catch a worker in the middle of a send). */
  beforeAccept?: (raw: string) => Promise<void>;
  /** Called once a message is accepted (`pnpm mail-catcher` prints and stores it). */
  onMessage?: (mail: CaughtMail) => void;
  /** Default 0: a free port, for the demo and tests; `pnpm mail-catcher` uses a fixed one. */
  port?: number;
}

/**
 * A real SMTP server on loopback that accepts every message and keeps it in memory: the
 * demo and the tests count what the worker delivered, and `pnpm mail-catcher` stands in for
 * a mail server in development. No TLS, any (or no) login.
 */
export async function startSmtpCatcher(options: SmtpCatcherOptions = {}): Promise<SmtpCatcher> {
  const messages: CaughtMail[] = [];
  let connections = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onConnect(_session, callback) {
      connections += 1;
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      const accept = async () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        // A test can hold the reply (a slow server) to catch the worker mid-send.
        if (options.beforeAccept) await options.beforeAccept(raw);
        const mail: CaughtMail = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          subject: /^Subject: (.*)$/m.exec(raw)?.[1]?.trim() ?? "",
          raw,
        };
        messages.push(mail);
        options.onMessage?.(mail);
      };
      // A hold that rejects answers the client with an error, instead of leaving it waiting
      // on a reply that never comes and the rejection unhandled.
      stream.on("end", () => {
        accept().then(() => callback(), callback);
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const { port } = server.server.address() as { port: number };
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    get connections() {
      return connections;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
