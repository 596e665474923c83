/** Any pino-compatible logger — these four methods, called `(fields, message)`: pino, a pino child (Fastify's `app.log`), console, winston … */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** Quiet by default: a library prints nothing unless asked. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
