import { defineProject } from "vitest/config";

export default defineProject({
  test: {
    name: "test-services",
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
  },
});
