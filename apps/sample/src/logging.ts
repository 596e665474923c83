import { pino, type DestinationStream, type Logger } from "pino";

/**
 * The one logger of both processes: pino, Fastify's own, one JSON object per line on stdout
 * (`{"level":30,"time":…,"process":"worker","msg":"…",…}`). The web process hands it to
 * Fastify (request logs), the worker to runWorker (the queue's lines) and to its own events.
 * LOG_LEVEL sets the level (default info; debug adds a line per job done by the queue).
 * Pipe it through `pino-pretty` to read it in a terminal.
 */
export function createLogger(processName: "web" | "worker", destination?: DestinationStream): Logger {
  const options = { level: process.env.LOG_LEVEL || "info", base: { process: processName, pid: process.pid } };
  return destination ? pino(options, destination) : pino(options);
}
