#!/usr/bin/env node
import { main } from "./cli/main.js";

main(process.argv.slice(2), { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`forge-jobs: ${(error as Error)?.message ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
