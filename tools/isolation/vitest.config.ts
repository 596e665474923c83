import { configDefaults, defineProject } from "vitest/config";

export default defineProject({
  test: {
    name: "isolation",
    include: ["test/**/*.test.ts"],
    // the fixtures are fake packages for the checker to read, not tests to run
    exclude: [...configDefaults.exclude, "test/fixtures/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
