import { defineProject } from "vitest/config";

export default defineProject({
  test: {
    name: "packaging",
    include: ["test/**/*.test.ts"],
    testTimeout: 240_000,
    hookTimeout: 240_000,
  },
});
