import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The built binary (pnpm build first). */
export const BIN = fileURLToPath(new URL("../../bin/forge-jobs.cjs", import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** Laid over the test process's environment; a key given as undefined is unset. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  onStart?: (child: ChildProcess) => void;
}

/** Runs the built `forge-jobs`, as an operator would, and collects what it printed. */
export function runCli(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  const env = { ...process.env, ...options.env };
  for (const [key, value] of Object.entries(options.env ?? {})) if (value === undefined) delete env[key];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: options.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    options.onStart?.(child);
  });
}

/** runCli with no DATABASE_URL of the test process's: each test names its database itself. */
export function cli(args: readonly string[], options: CliOptions = {}): Promise<CliResult> {
  return runCli(args, { ...options, env: { DATABASE_URL: "", ...options.env } });
}
