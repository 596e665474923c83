#!/usr/bin/env node
import { main } from "./cli/main.js";

// A reader that stops reading (`forge-jobs status --watch | head`) closes the pipe: the next
// write fails with EPIPE, an 'error' event nobody handled, which crashed the process with a
// stack. The reader has what it wanted: end quietly, as Unix tools do.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

main(process.argv.slice(2), { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t), isTTY: process.stdout.isTTY === true }).then(
  (code) => exit(code),
  (error: unknown) => {
    process.stderr.write(`forge-jobs: ${(error as Error)?.message ?? String(error)}\n`);
    exit(1);
  },
);

/**
 * Exits once what was written is flushed, not when the event loop empties: after a worker's
 * grace period its unfinished jobs were handed back and may run elsewhere, so a handler that
 * ignored its abort signal must not keep this process (and its side effects) alive.
 */
function exit(code: number): void {
  process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
}
