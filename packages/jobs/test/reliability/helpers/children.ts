import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { waitFor } from "../../helpers/backends.js";

const TSX = createRequire(import.meta.url).resolve("tsx");
/** packages/jobs, where child processes run (so tsx finds the package's tsconfig). */
export const PACKAGE_DIR = fileURLToPath(new URL("../../../", import.meta.url));

export function fixture(name: string): string {
  return fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Every message a child printed on stdout as one JSON line (anything else is kept as `{ text }`). */
export type Message = Record<string, unknown> & { type?: string };

const alive = new Set<ChildProcess>();
process.once("exit", () => {
  // Last resort when a test run dies: never leave worker processes behind.
  for (const child of alive) child.kill("SIGKILL");
});

/**
 * A child process of the suite: a TypeScript script run through tsx, talking in JSON lines on
 * stdout. Tests wait on its messages and its exit by polling, never by fixed sleeps.
 */
export class Child {
  readonly proc: ChildProcess;
  readonly messages: Message[] = [];
  stderr = "";
  exit: Exit | null = null;
  readonly exited: Promise<Exit>;

  constructor(
    readonly label: string,
    args: string[],
    env: Record<string, string> = {},
  ) {
    this.proc = spawn(process.execPath, ["--import", TSX, ...args], {
      cwd: PACKAGE_DIR,
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    alive.add(this.proc);
    let buffered = "";
    this.proc.stdout!.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      let newline: number;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (line.trim()) this.messages.push(parseLine(line));
      }
    });
    this.proc.stderr!.on("data", (chunk: Buffer) => {
      // Keep the tail only: a soak can print a lot of reconnect noise.
      this.stderr = (this.stderr + chunk.toString()).slice(-20_000);
    });
    this.proc.stdin!.on("error", () => undefined); // writing to a child that just died
    this.exited = new Promise((resolve) => {
      this.proc.on("exit", (code, signal) => {
        alive.delete(this.proc);
        this.exit = { code, signal };
        resolve(this.exit);
      });
    });
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  get running(): boolean {
    return this.exit === null;
  }

  /** Waits (by polling) for a message matching `match`; fails early if the child exits first. */
  async waitForMessage(what: string, match: (m: Message) => boolean, timeoutMs = 20_000): Promise<Message> {
    return waitFor(
      `${this.label}: ${what}`,
      async () => {
        const found = this.messages.find(match);
        if (found) return found;
        this.assertRunning();
        return undefined;
      },
      timeoutMs,
    );
  }

  /** Throws (with its stderr) if the process has exited: a probe calls this to fail fast on a crash. */
  assertRunning(): void {
    if (this.exit) throw new Error(`${this.label} exited (${JSON.stringify(this.exit)}); stderr:\n${this.stderr}`);
  }

  count(match: (m: Message) => boolean): number {
    return this.messages.filter(match).length;
  }

  send(line: string): void {
    this.proc.stdin!.write(line + "\n");
  }

  kill(signal: NodeJS.Signals): void {
    if (this.running) this.proc.kill(signal);
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 15_000): Promise<Exit> {
    if (!this.running) return this.exit!;
    this.kill("SIGTERM");
    const timer = setTimeout(() => this.kill("SIGKILL"), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

function parseLine(line: string): Message {
  try {
    const value = JSON.parse(line) as unknown;
    return typeof value === "object" && value !== null ? (value as Message) : { text: line };
  } catch {
    return { text: line };
  }
}

/** Kills whatever a test left running (afterAll / finally), waiting for each exit. */
export async function killAll(children: Iterable<Child>): Promise<void> {
  await Promise.all(
    [...children].map(async (child) => {
      child.kill("SIGKILL");
      await child.exited;
    }),
  );
}
