import { defineProject } from "vitest/config";

export default defineProject({
  test: {
    name: "orm",
    include: ["test/**/*.test.ts"],
    // The Prisma clients are generated, not committed.
    globalSetup: ["./src/prisma-generate.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
