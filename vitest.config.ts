import { defineConfig } from "vitest/config";

// One run over every workspace project, so .ci/run reads a single pair of counts.
export default defineConfig({
  test: {
    projects: ["packages/*", "apps/*", "tools/*"],
    // Which database servers answer: outside CI, one that does not is left out with a notice.
    globalSetup: ["./tools/test-services/src/setup.ts"],
  },
});
