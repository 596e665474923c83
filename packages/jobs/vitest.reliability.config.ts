import { defineConfig } from "vitest/config";

/**
 * The reliability suite on its own (test/reliability/, see RELIABILITY.md). In CI the same
 * files run inside the `jobs` project with everything else; this config is for running them
 * alone, e.g. the long soak:
 *
 *   FORGE_RELIABILITY_LONG=1 npx vitest run -c packages/jobs/vitest.reliability.config.ts
 *
 * One file at a time: each one already fills the machine with worker processes and its
 * own database load, and the timings they assert need the cores they were tuned on.
 */
export default defineConfig({
  root: import.meta.dirname,
  test: {
    name: "jobs-reliability",
    include: ["test/reliability/**/*.test.ts"],
    fileParallelism: false,
    // Each test sets its own timeout from its counts (helpers/scale.ts); hooks start servers.
    testTimeout: 600_000,
    hookTimeout: 120_000,
  },
});
