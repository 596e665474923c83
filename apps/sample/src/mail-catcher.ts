// `pnpm mail-catcher`: a mail server for development, so `pnpm worker` has somewhere to send
// with nothing else installed. It accepts every message on 127.0.0.1, prints one line for each
// and stores it as an .eml file under <DATA_DIR>/mail/; it delivers nothing. Point the worker at
// it with SMTP_URL=smtp://127.0.0.1:1025 (what `pnpm dev` does).
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { appEnvironment, ConfigError, loadConfig } from "./config.js";
import { startSmtpCatcher, type CaughtMail, type SmtpCatcher } from "./smtp-catcher.js";

/** The port when MAIL_CATCHER_PORT is not set: the usual one for development mail servers. */
export const MAIL_CATCHER_PORT = 1025;

export function catcherPort(env: NodeJS.ProcessEnv): number {
  const text = env.MAIL_CATCHER_PORT;
  if (text === undefined || text === "") return MAIL_CATCHER_PORT;
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < 1 || port > 65535)
    throw new ConfigError(`MAIL_CATCHER_PORT must be a port number from 1 to 65535, got ${JSON.stringify(text)}`);
  return port;
}

/**
 * Starts the catcher on MAIL_CATCHER_PORT (default 1025), storing each message in
 * `<dataDir>/mail/` and calling `print` with one line for it. A port in use is a ConfigError
 * that says which variable to change.
 */
export async function startMailCatcher(env: NodeJS.ProcessEnv, print: (line: string) => void): Promise<SmtpCatcher> {
  const port = catcherPort(env);
  const dir = path.join(loadConfig(env).dataDir, "mail");
  mkdirSync(dir, { recursive: true });
  let count = 0;
  const store = (mail: CaughtMail) => {
    count += 1;
    // A timestamp first: the folder lists in the order the mail came in, across restarts.
    const file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, "-")}-${count}.eml`);
    writeFileSync(file, mail.raw);
    print(`mail ${count}: ${mail.from || "(no sender)"} → ${mail.to.join(", ")}  "${mail.subject}"  ${file}`);
  };
  try {
    return await startSmtpCatcher({ port, onMessage: store });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EADDRINUSE")
      throw new ConfigError(`port ${port} is in use (another mail catcher?): stop it, or set MAIL_CATCHER_PORT to a free port`);
    throw error;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const catcher = await startMailCatcher(appEnvironment(), (line) => console.log(line));
    // Before the line that says it is up: until a listener exists, SIGTERM's default action
    // kills the process outright (no exit 0), and whoever read the line may already be sending it.
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => void catcher.close().then(() => process.exit(0)));
    console.log(`mail catcher on ${catcher.url}: run the worker with SMTP_URL=${catcher.url} (Ctrl-C to stop)`);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`mail-catcher: ${error.message}`);
    process.exit(1);
  }
}
