import { pino, type DestinationStream, type Logger } from "pino";

/**
 * A query parameter whose value is a secret: `token` (the unsubscribe link's) and the usual
 * names of credentials. Matched in the JSON text of a line, so the value stops at `&`, `#`,
 * whitespace or the string's closing quote, and runs over escaped characters (`\"`).
 */
const SECRET_PARAM = /([?&](?:[\w.-]*(?:token|secret|password|passwd|signature|api_?key)|key|sig|code)=)(?:[^&#\s"\\]|\\.)*/gi;

/** A line with every query-string secret's value replaced by `[redacted]`. */
export function redactQuerySecrets(line: string): string {
  return line.replace(SECRET_PARAM, "$1[redacted]");
}

/**
 * The one logger of both processes: pino, Fastify's own, one JSON object per line on stdout
 * (`{"level":30,"time":…,"process":"worker","msg":"…",…}`). The web process hands it to
 * Fastify (request logs), the worker to runWorker (the queue's lines) and to its own events.
 * LOG_LEVEL sets the level (default info; debug adds a line per job done by the queue).
 * Pipe it through `pino-pretty` to read it in a terminal.
 */
export function createLogger(processName: "web" | "worker", destination?: DestinationStream): Logger {
  const options = {
    level: process.env.LOG_LEVEL || "info",
    base: { process: processName, pid: process.pid },
    // A URL reaches the log in Fastify's request line, its not-found line and in error messages
    // and stacks: the written line is redacted, not each field that may hold one.
    hooks: { streamWrite: redactQuerySecrets },
  };
  return destination ? pino(options, destination) : pino(options);
}
