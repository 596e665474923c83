import net from "node:net";
import { SMTPServer } from "smtp-server";

/** An SMTP reply the test server gives instead of accepting: `[code, text]`. */
export type Reply = readonly [number, string];

export interface Delivered {
  mailFrom: string;
  /** The envelope: the RCPT TO addresses the server accepted. */
  rcptTo: string[];
  /** The message bytes as received after DATA. */
  raw: string;
}

export interface SmtpBehaviour {
  /** Refuse the connection with this reply instead of the greeting (e.g. 421 too many connections). */
  connect?: Reply;
  /** Refuse MAIL FROM with this reply. */
  mailFrom?: Reply;
  /** Refuse a RCPT TO: return a reply for the addresses to refuse. */
  rcptTo?: (address: string) => Reply | undefined;
  /** Refuse the message at the end of DATA with this reply (after reading it). */
  data?: Reply;
  /** Hold the replies to RCPT TO until this promise settles. */
  holdRcpt?: Promise<void>;
}

export interface TestSmtpServer {
  port: number;
  url: string;
  /** Messages the server accepted. */
  delivered: Delivered[];
  /** RCPT TO commands the server saw, accepted or not. */
  rcptSeen: string[];
  /** Messages whose bytes arrived, accepted or not. */
  dataSeen: string[];
  connections: number;
  /** Sessions that have ended (the client hung up or was cut off). */
  closes: number;
  /** Resolves on the next session close (the client hung up or was cut off). */
  nextClose(): Promise<void>;
  close(): Promise<void>;
}

function smtpError([code, text]: Reply): Error {
  return Object.assign(new Error(text), { responseCode: code });
}

/** A real SMTP server on 127.0.0.1, random port, no TLS, no auth. */
export async function startSmtpServer(behaviour: SmtpBehaviour = {}): Promise<TestSmtpServer> {
  const delivered: Delivered[] = [];
  const rcptSeen: string[] = [];
  const dataSeen: string[] = [];
  let closeWaiters: Array<() => void> = [];
  let connections = 0;
  let closes = 0;

  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    closeTimeout: 100,
    onConnect(_session, callback) {
      connections += 1;
      callback(behaviour.connect ? smtpError(behaviour.connect) : undefined);
    },
    onClose() {
      closes += 1;
      const waiters = closeWaiters;
      closeWaiters = [];
      for (const wake of waiters) wake();
    },
    onMailFrom(_address, _session, callback) {
      callback(behaviour.mailFrom ? smtpError(behaviour.mailFrom) : undefined);
    },
    onRcptTo(address, _session, callback) {
      rcptSeen.push(address.address);
      const reply = behaviour.rcptTo?.(address.address);
      const answer = (): void => callback(reply ? smtpError(reply) : undefined);
      if (behaviour.holdRcpt) void behaviour.holdRcpt.then(answer, answer);
      else answer();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        dataSeen.push(raw);
        if (behaviour.data) return callback(smtpError(behaviour.data));
        const from = session.envelope.mailFrom;
        delivered.push({
          mailFrom: from === false ? "" : from.address,
          rcptTo: session.envelope.rcptTo.map((rcpt) => rcpt.address),
          raw,
        });
        callback();
      });
    },
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.server.address() as net.AddressInfo;

  return {
    port,
    url: `smtp://127.0.0.1:${port}`,
    delivered,
    rcptSeen,
    dataSeen,
    get connections() {
      return connections;
    },
    get closes() {
      return closes;
    },
    nextClose: () => new Promise<void>((resolve) => closeWaiters.push(resolve)),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A port on 127.0.0.1 that nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A TCP server that accepts connections and never says a word (no SMTP greeting). */
export async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The headers of a raw message, unfolded, before the first blank line. */
export function headerBlock(raw: string): string {
  const end = raw.indexOf("\r\n\r\n");
  return (end === -1 ? raw : raw.slice(0, end)).replace(/\r\n[ \t]+/g, " ");
}

/** Header lines whose name is `name` (case-insensitive), values only. */
export function headerValues(raw: string, name: string): string[] {
  const prefix = `${name.toLowerCase()}:`;
  return headerBlock(raw)
    .split("\r\n")
    .filter((line) => line.toLowerCase().startsWith(prefix))
    .map((line) => line.slice(prefix.length).trim());
}

/** The decoded body of the MIME part whose headers mention `filename`. */
export function attachmentBytes(raw: string, filename: string): Buffer {
  const parts = raw.split(/\r\n--[^\r\n]+\r\n/);
  const part = parts.find((candidate) => headerBlock(candidate).includes(filename));
  if (!part) throw new Error(`no part named ${filename} in:\n${raw}`);
  const body = part.slice(part.indexOf("\r\n\r\n") + 4).split(/\r\n--/)[0] ?? "";
  return Buffer.from(body.replace(/\s+/g, ""), "base64");
}

/** Decodes RFC 2047 encoded words (=?UTF-8?Q?…?= and =?UTF-8?B?…?=) in a header value. */
export function decodeWords(value: string): string {
  return value.replace(/\?=\s+=\?/g, "?==?").replace(/=\?utf-8\?([QB])\?([^?]*)\?=/gi, (_word, encoding: string, text: string) =>
    encoding.toUpperCase() === "B"
      ? Buffer.from(text, "base64").toString("utf8")
      : Buffer.from(
          text.replace(/_/g, " ").replace(/=([0-9A-F]{2})/gi, (_hex, code: string) => String.fromCharCode(parseInt(code, 16))),
          "latin1",
        ).toString("utf8"),
  );
}
