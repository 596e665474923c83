// `pnpm dev`: the web process, the worker and a mail catcher in one terminal, for development
// on a machine with nothing else installed (SQLite from .env, mail caught by `src/mail-catcher.ts`).
// The web process and the worker stay two processes, as in production; Ctrl-C stops both the
// way a deployment would (one SIGTERM each: running jobs finish).
import { spawn, type ChildProcess } from "node:child_process";
import { APP_DIR, appEnvironment, ConfigError } from "./config.js";
import { startMailCatcher } from "./mail-catcher.js";
import type { SmtpCatcher } from "./smtp-catcher.js";

const env = appEnvironment();
let catcher: SmtpCatcher | undefined;
try {
  // An SMTP_URL of your own wins: then mail goes there and no catcher starts.
  if (!env.SMTP_URL) catcher = await startMailCatcher(env, (line) => console.log(`[mail-catcher] ${line}`));
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(`dev: ${error.message}`);
  process.exit(1);
}
const smtpUrl = env.SMTP_URL || catcher!.url;
console.log(catcher ? `[mail-catcher] on ${catcher.url}: the worker's mail lands here` : "[dev] mail goes to SMTP_URL");

// Each in its own process group: a terminal's Ctrl-C reaches this process alone, which passes one
// SIGTERM on (a second signal would make the worker drop its running jobs).
const children: ChildProcess[] = ["src/server.ts", "src/worker.ts"].map((entry) =>
  spawn(process.execPath, ["--import", "tsx", entry], { cwd: APP_DIR, env: { ...process.env, SMTP_URL: smtpUrl }, stdio: "inherit", detached: true }),
);
const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

let stopping = false;
let failed = false;
function stop(): void {
  if (stopping) return;
  stopping = true;
  for (const child of children) if (running(child)) child.kill("SIGTERM");
  void Promise.all(children.filter(running).map((child) => new Promise((resolve) => child.once("exit", resolve))))
    .then(() => catcher?.close())
    .then(() => process.exit(failed ? 1 : 0));
}
for (const child of children) {
  child.once("exit", (code) => {
    // Either process ending on its own ends the other: half an app is not left running.
    if (!stopping || code !== 0) failed = true;
    stop();
  });
}
for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, stop);
