// What the import and export measures share: each runs its measured part in a child process.
import { spawn } from "node:child_process";
import { once } from "node:events";

/** Bytes as megabytes, one decimal. */
export const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

/**
 * Runs `script` again in a process of its own, with this process's Node flags (tsx) and `args`,
 * and parses the JSON it prints: the child's peak RSS is then the measure's own, not that of
 * the process that generated its file.
 */
export async function inChild<T>(script: string, args: string[]): Promise<T> {
  const proc = spawn(process.execPath, [...process.execArgv, script, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  let output = "";
  proc.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const [code] = (await once(proc, "exit")) as [number | null];
  if (code !== 0) throw new Error(`the ${args[0] ?? "measure"} process exited with ${code}`);
  return JSON.parse(output) as T;
}
